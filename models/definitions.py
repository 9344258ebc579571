"""PyTorch module definitions for the Strata test models.

Importable as ``from models.definitions import GPT, Bert, MLP`` (run from the
repository root). All code here is original to the Strata project.

The models are deliberately written in the style of their well-known
references (nanoGPT for GPT, HF-style BERT) so the ONNX graphs produced by
``torch.onnx.export`` exercise the same patterns real exported models do:
shape arithmetic from ``x.size()``, registered buffers, tied weights,
masked_fill with -inf, exact GELU (Erf), LayerNormalization, Dropout in
training mode, and so on.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# GPT (nanoGPT-like, GPT-2 style decoder)
# --------------------------------------------------------------------------


@dataclass
class GPTConfig:
    block_size: int = 64  # context length
    vocab_size: int = 256
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True  # bias in Linears and LayerNorms


GPT_TINY = GPTConfig()
# Eight blocks at a small width: deep enough to split into up to 8 pipeline
# stages (one block each), small enough to train in seconds on a CPU.
GPT_DEEP = GPTConfig(block_size=32, vocab_size=256, n_layer=8, n_head=4,
                     n_embd=32)
GPT2_124M = GPTConfig(block_size=1024, vocab_size=50257, n_layer=12, n_head=12,
                      n_embd=768)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # fused key, query, value projection
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        # causal mask: 1 on and below the diagonal
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(config.block_size, config.block_size))
            .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hd = C // self.n_head
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)  # (B, nh, T, hd)
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        y = self.resid_dropout(self.c_proj(y))
        return y


class GPTMLP(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()  # exact (erf) GELU
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        x = self.c_fc(x)
        x = self.gelu(x)
        x = self.c_proj(x)
        x = self.dropout(x)
        return x


class Block(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = GPTMLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config: GPTConfig = GPT_TINY):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        # weight tying
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(_gpt2_init)

    def forward(self, idx):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size
        pos = torch.arange(0, t, dtype=torch.long, device=device)  # (t,)
        tok_emb = self.transformer.wte(idx)  # (b, t, n_embd)
        pos_emb = self.transformer.wpe(pos)  # (t, n_embd)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        return logits


def _gpt2_init(module):
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


# --------------------------------------------------------------------------
# BERT-style encoder with MLM + NSP heads
# --------------------------------------------------------------------------


@dataclass
class BertConfig:
    vocab_size: int = 256
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 256
    max_position_embeddings: int = 64
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.0
    initializer_range: float = 0.02


BERT_TINY = BertConfig()
# Eight layers at a small width, for pipeline-stage tests (see GPT_DEEP).
BERT_DEEP = BertConfig(hidden_size=32, num_hidden_layers=8,
                       num_attention_heads=4, intermediate_size=128,
                       max_position_embeddings=32)


class BertEmbeddings(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings,
                                                config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size,
                                                  config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = torch.arange(0, seq_length, dtype=torch.long,
                                    device=input_ids.device).unsqueeze(0)
        x = (self.word_embeddings(input_ids)
             + self.position_embeddings(position_ids)
             + self.token_type_embeddings(token_type_ids))
        x = self.LayerNorm(x)
        x = self.dropout(x)
        return x


class BertSelfAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_heads * self.head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.dropout)

    def _split_heads(self, x):
        new_shape = x.size()[:-1] + (self.num_heads, self.head_size)
        return x.view(new_shape).permute(0, 2, 1, 3)  # (B, nh, T, hd)

    def forward(self, hidden_states, extended_mask):
        q = self._split_heads(self.query(hidden_states))
        k = self._split_heads(self.key(hidden_states))
        v = self._split_heads(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.head_size)
        scores = scores + extended_mask
        probs = F.softmax(scores, dim=-1)
        probs = self.dropout(probs)
        ctx = torch.matmul(probs, v)
        ctx = ctx.permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.all_head_size,))
        return ctx


class BertLayer(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertSelfAttention(config)
        self.attn_out_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.attn_out_dropout = nn.Dropout(config.dropout)
        self.attn_out_LayerNorm = nn.LayerNorm(config.hidden_size,
                                               eps=config.layer_norm_eps)
        self.intermediate_dense = nn.Linear(config.hidden_size,
                                            config.intermediate_size)
        self.intermediate_act = nn.GELU()
        self.output_dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.output_dropout = nn.Dropout(config.dropout)
        self.output_LayerNorm = nn.LayerNorm(config.hidden_size,
                                             eps=config.layer_norm_eps)

    def forward(self, x, extended_mask):
        a = self.attention(x, extended_mask)
        a = self.attn_out_dropout(self.attn_out_dense(a))
        x = self.attn_out_LayerNorm(a + x)  # post-LN
        h = self.intermediate_act(self.intermediate_dense(x))
        h = self.output_dropout(self.output_dense(h))
        x = self.output_LayerNorm(h + x)
        return x


class Bert(nn.Module):
    """BERT-style encoder with a tanh pooler, MLM head (decoder tied to the
    word embeddings, own bias) and NSP head. Returns (mlm_logits, nsp_logits)."""

    def __init__(self, config: BertConfig = BertConfig()):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.layers = nn.ModuleList(
            [BertLayer(config) for _ in range(config.num_hidden_layers)])
        # pooler
        self.pooler_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.pooler_act = nn.Tanh()
        # MLM head
        self.mlm_transform_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.mlm_transform_act = nn.GELU()
        self.mlm_transform_LayerNorm = nn.LayerNorm(config.hidden_size,
                                                    eps=config.layer_norm_eps)
        self.mlm_decoder = nn.Linear(config.hidden_size, config.vocab_size,
                                     bias=False)
        self.mlm_bias = nn.Parameter(torch.zeros(config.vocab_size))
        # NSP head
        self.nsp = nn.Linear(config.hidden_size, 2)
        self.apply(self._init_weights)
        # weight tying (decoder shares the word-embedding matrix)
        self.mlm_decoder.weight = self.embeddings.word_embeddings.weight

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def forward(self, input_ids, token_type_ids, attention_mask):
        extended_mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, extended_mask)
        pooled = self.pooler_act(self.pooler_dense(x[:, 0]))
        h = self.mlm_transform_act(self.mlm_transform_dense(x))
        h = self.mlm_transform_LayerNorm(h)
        mlm_logits = self.mlm_decoder(h) + self.mlm_bias
        nsp_logits = self.nsp(pooled)
        return mlm_logits, nsp_logits


# --------------------------------------------------------------------------
# MLP classifier
# --------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, in_features=64, hidden=128, num_classes=10, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, features):
        return self.net(features)


# --------------------------------------------------------------------------
# A small CNN for scikit-learn's 8 x 8 digits (models/digits.py)
# --------------------------------------------------------------------------


class DigitsCNN(nn.Module):
    """Two 3 x 3 convolutions with max pooling and a linear head: 8 x 8
    grey images in, 10 class logits out."""

    def __init__(self, channels=16, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * channels * 2 * 2, num_classes)

    def forward(self, image):
        return self.head(torch.flatten(self.features(image), 1))


# --------------------------------------------------------------------------
# Vision: a small ViT and a CIFAR-style ResNet-18 (32 x 32 images)
# --------------------------------------------------------------------------


@dataclass
class ViTConfig:
    image_size: int = 32
    patch_size: int = 4
    channels: int = 3
    num_classes: int = 10
    dim: int = 192
    depth: int = 6
    heads: int = 3
    mlp_dim: int = 768
    dropout: float = 0.0


VIT_SMALL = ViTConfig()
# The committed models/vit_tiny.onnx: 16 x 16 images, 17 positions.
VIT_TINY = ViTConfig(image_size=16, patch_size=4, dim=32, depth=2, heads=2,
                     mlp_dim=64)


class ViTAttention(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.heads = config.heads
        self.qkv = nn.Linear(config.dim, 3 * config.dim)
        self.proj = nn.Linear(config.dim, config.dim)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        B, N, C = x.size()
        hd = C // self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, N, self.heads, hd).transpose(1, 2)
        k = k.view(B, N, self.heads, hd).transpose(1, 2)
        v = v.view(B, N, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = self.dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, N, C)
        return self.proj(y)


class ViTBlock(nn.Module):
    def __init__(self, config: ViTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.dim)
        self.attn = ViTAttention(config)
        self.ln_2 = nn.LayerNorm(config.dim)
        self.fc1 = nn.Linear(config.dim, config.mlp_dim)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(config.mlp_dim, config.dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.fc2(self.gelu(self.fc1(self.ln_2(x))))
        return x


class ViT(nn.Module):
    """Pre-LN vision transformer: a strided-conv patch embedding, a class
    token, learned positions, classification from the class token."""

    def __init__(self, config: ViTConfig = VIT_SMALL):
        super().__init__()
        self.config = config
        patches = (config.image_size // config.patch_size) ** 2
        self.patch_embed = nn.Conv2d(config.channels, config.dim,
                                     kernel_size=config.patch_size,
                                     stride=config.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, patches + 1, config.dim))
        self.blocks = nn.ModuleList([ViTBlock(config)
                                     for _ in range(config.depth)])
        self.ln = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes)
        nn.init.normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=0.02)

    def forward(self, images):
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (B, N, dim)
        cls = self.cls_token.expand(x.size(0), -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False),
                nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class CifarResNet(nn.Module):
    """A ResNet for small images (CIFAR style: a 3 x 3 stem, no max pool):
    `blocks` lists each basic block's (output channels, stride)."""

    def __init__(self, blocks, stem=64, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        layers, cin = [], stem
        for cout, stride in blocks:
            layers.append(BasicBlock(cin, cout, stride))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, images):
        x = F.relu(self.bn1(self.conv1(images)))
        x = self.layers(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class ResNet18(CifarResNet):
    """ResNet-18 for 32 x 32 images, 11.2M parameters at 10 classes."""

    def __init__(self, num_classes=10):
        super().__init__([(64, 1), (64, 1), (128, 2), (128, 1), (256, 2),
                          (256, 1), (512, 2), (512, 1)], 64, num_classes)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters; tied parameters are counted once
    (nn.Module.parameters() de-duplicates shared tensors)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
