//===- Nccl.cpp - NCCL's collectives over shared memory -------------------===//
//
// Part of Strata's CUDA emulation (see Emulation.h). A communicator is a POSIX
// shared-memory segment named by its unique id, mapped by every member
// (ranks of one host): a header with a barrier counter, then one slot per
// rank. A collective is stream work: each rank copies its part into its
// slot, all meet at the barrier, each reads what it needs, and they meet
// again before the slots are reused; a large collective goes a slot at a
// time. Sums add the ranks' values in rank order in f32 (f64 for f64,
// 64-bit integers for integers) and round once, so every rank gets the same
// bits.
//
// Point to point (ncclSend / ncclRecv): each ordered pair of ranks has a
// mailbox after the slots, a ring of kMailboxBytes with counters of the
// bytes written and read. A send writes into it without waiting for the
// receive (it waits only while the ring is full); a receive takes the
// oldest bytes. Messages from one rank to another arrive in the order sent.
//
// A rank that waits at a barrier longer than STRATA_CUDA_EMULATION_NCCL_TIMEOUT
// seconds (default 120), or sees another rank abort, gives up: the
// communicator's asynchronous error becomes ncclRemoteError, as NCCL reports
// a peer that went away, and the rank's next polls see it.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"

#include "strata/Runtime/NarrowFloat.h"

#include <nccl.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>

namespace {

/// Bytes of each rank's slot.
constexpr size_t kSlotBytes = size_t(16) << 20;
/// Bytes of each ordered pair's mailbox ring (and of its counters' line).
constexpr size_t kMailboxBytes = size_t(4) << 20;
constexpr size_t kMailboxHeader = 64;

struct Header {
  std::atomic<uint64_t> arrived;
  std::atomic<int> aborted;
};

struct Mailbox {
  std::atomic<uint64_t> written;
  std::atomic<uint64_t> read;
};

double timeoutSeconds() {
  static const double limit = [] {
    const char *env = std::getenv("STRATA_CUDA_EMULATION_NCCL_TIMEOUT");
    return env && std::atof(env) > 0 ? std::atof(env) : 120.0;
  }();
  return limit;
}

} // namespace

struct ncclComm {
  int ranks = 1;
  int rank = 0;
  std::string name;
  Header *header = nullptr;
  unsigned char *slots = nullptr;
  size_t mappedBytes = 0;
  uint64_t barriers = 0;
  std::atomic<int> asyncError{ncclSuccess};

  unsigned char *slot(int r) { return slots + size_t(r) * kSlotBytes; }

  /// The mailbox of messages from rank `from` to rank `to`, and its ring.
  Mailbox *mailbox(int from, int to) {
    return reinterpret_cast<Mailbox *>(
        slots + size_t(ranks) * kSlotBytes +
        size_t(from * ranks + to) * (kMailboxHeader + kMailboxBytes));
  }
  unsigned char *ring(int from, int to) {
    return reinterpret_cast<unsigned char *>(mailbox(from, to)) +
           kMailboxHeader;
  }

  /// Waits until `ready()`; false on a timeout or an abort. `waiting`
  /// says what for in the timeout's message ("for the others").
  bool waitUntil(const std::function<bool()> &ready,
                 const std::string &waiting) {
    auto start = std::chrono::steady_clock::now();
    for (int spins = 0; !ready(); ++spins) {
      if (header->aborted.load()) {
        asyncError = ncclRemoteError;
        return false;
      }
      if (spins > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        start)
              .count() > timeoutSeconds()) {
        std::fprintf(stderr,
                     "CUDA emulation: NCCL rank %d of %d waited %g s %s; "
                     "giving up\n",
                     rank, ranks, timeoutSeconds(), waiting.c_str());
        header->aborted.store(1);
        asyncError = ncclRemoteError;
        return false;
      }
    }
    return true;
  }

  /// Appends `bytes` to the mailbox to `peer`, waiting while its ring is
  /// full.
  void send(const unsigned char *data, size_t bytes, int peer) {
    Mailbox *box = mailbox(rank, peer);
    unsigned char *r = ring(rank, peer);
    while (bytes) {
      uint64_t w = box->written.load();
      if (!waitUntil([&] { return w - box->read.load() < kMailboxBytes; },
                     "in ncclSend with rank " + std::to_string(peer)))
        return;
      size_t room = kMailboxBytes - size_t(w - box->read.load());
      size_t at = size_t(w % kMailboxBytes);
      size_t n = std::min({bytes, room, kMailboxBytes - at});
      std::memcpy(r + at, data, n);
      box->written.store(w + n);
      data += n;
      bytes -= n;
    }
  }

  /// Takes `bytes` from the mailbox from `peer`, waiting for them.
  void recv(unsigned char *data, size_t bytes, int peer) {
    Mailbox *box = mailbox(peer, rank);
    const unsigned char *r = ring(peer, rank);
    while (bytes) {
      uint64_t at = box->read.load();
      if (!waitUntil([&] { return box->written.load() > at; },
                     "in ncclRecv with rank " + std::to_string(peer)))
        return;
      size_t ready = size_t(box->written.load() - at);
      size_t offset = size_t(at % kMailboxBytes);
      size_t n = std::min({bytes, ready, kMailboxBytes - offset});
      std::memcpy(data, r + offset, n);
      box->read.store(at + n);
      data += n;
      bytes -= n;
    }
  }

  /// Waits until every rank has arrived; false on a timeout or an abort.
  bool barrier() {
    if (asyncError != ncclSuccess)
      return false;
    ++barriers;
    header->arrived.fetch_add(1);
    uint64_t target = barriers * uint64_t(ranks);
    return waitUntil([&] { return header->arrived.load() >= target; },
                     "for the others");
  }
};

namespace {

size_t elementBytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: case ncclUint8: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  }
  return 0;
}

template <typename T> double load(const unsigned char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return double(v);
}

/// out[i] = sum over ranks r (in order) of part(r)[i], for n elements.
void sumInto(void *out, ncclDataType_t t, size_t n,
             const std::function<const unsigned char *(int)> &part,
             int ranks) {
  auto *o = static_cast<unsigned char *>(out);
  size_t e = elementBytes(t);
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
    case ncclFloat32: {
      float acc = 0;
      for (int r = 0; r < ranks; ++r)
        acc += float(load<float>(part(r) + i * e));
      std::memcpy(o + i * e, &acc, e);
      break;
    }
    case ncclFloat64: {
      double acc = 0;
      for (int r = 0; r < ranks; ++r)
        acc += load<double>(part(r) + i * e);
      std::memcpy(o + i * e, &acc, e);
      break;
    }
    case ncclBfloat16:
    case ncclFloat16: {
      float acc = 0;
      for (int r = 0; r < ranks; ++r) {
        uint16_t bits;
        std::memcpy(&bits, part(r) + i * e, 2);
        acc += t == ncclBfloat16 ? strata::runtime::fromBf16Bits(bits)
                                 : strata::runtime::fromFp16Bits(bits);
      }
      uint16_t bits = t == ncclBfloat16 ? strata::runtime::bf16Bits(acc)
                                        : strata::runtime::fp16Bits(acc);
      std::memcpy(o + i * e, &bits, 2);
      break;
    }
    default: {
      uint64_t acc = 0;
      for (int r = 0; r < ranks; ++r) {
        uint64_t v = 0;
        std::memcpy(&v, part(r) + i * e, e);
        acc += v;
      }
      std::memcpy(o + i * e, &acc, e);
      break;
    }
    }
  }
}

/// Enqueues a collective as stream work.
ncclResult_t collective(ncclComm_t comm, ncclDataType_t type,
                        cudaStream_t stream, const char *what,
                        std::function<void(ncclComm_t)> body) {
  if (!comm || !elementBytes(type))
    return ncclInvalidArgument;
  cudaError_t e = strata::cuda_emulation::enqueue(
      stream,
      [comm, body = std::move(body)] {
        if (comm->asyncError == ncclSuccess)
          body(comm);
      },
      what);
  return e == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

} // namespace

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error";
  case ncclSystemError: return "unhandled system error";
  case ncclInternalError: return "internal error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::random_device device;
  std::snprintf(id->internal, sizeof(id->internal), "strata-nccl-%d-%08x%08x",
                int(getpid()), unsigned(device()), unsigned(device()));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id,
                              int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  auto *comm = new ncclComm();
  comm->ranks = nranks;
  comm->rank = rank;
  // Formatted, not concatenated: GCC 12's -Wrestrict misfires on the
  // std::string form.
  char name[128];
  std::snprintf(name, sizeof(name), "/%.100s", id.internal);
  comm->name = name;
  comm->mappedBytes = 4096 + size_t(nranks) * kSlotBytes +
                      size_t(nranks) * size_t(nranks) *
                          (kMailboxHeader + kMailboxBytes);
  int fd = shm_open(comm->name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, off_t(comm->mappedBytes)) != 0) {
    std::fprintf(stderr, "CUDA emulation: NCCL shared memory %s: %s\n",
                 comm->name.c_str(), std::strerror(errno));
    if (fd >= 0)
      close(fd);
    delete comm;
    return ncclSystemError;
  }
  void *p = mmap(nullptr, comm->mappedBytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    delete comm;
    return ncclSystemError;
  }
  comm->header = static_cast<Header *>(p);
  comm->slots = static_cast<unsigned char *>(p) + 4096;
  // Everyone has mapped it: the name can go.
  if (!comm->barrier()) {
    munmap(p, comm->mappedBytes);
    delete comm;
    return ncclRemoteError;
  }
  if (rank == 0)
    shm_unlink(comm->name.c_str());
  *out = comm;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  munmap(comm->header, comm->mappedBytes);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  comm->header->aborted.store(1);
  return ncclCommDestroy(comm);
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  if (!comm)
    return ncclInvalidArgument;
  *count = comm->ranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  if (!comm)
    return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm)
    return ncclInvalidArgument;
  *asyncError = ncclResult_t(comm->asyncError.load());
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff,
                           size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  size_t e = elementBytes(datatype), total = sendcount * e;
  return collective(comm, datatype, stream, "ncclAllGather", [=](ncclComm_t c) {
    auto *send = static_cast<const unsigned char *>(sendbuff);
    auto *recv = static_cast<unsigned char *>(recvbuff);
    for (size_t at = 0; at < total; at += kSlotBytes) {
      size_t n = std::min(kSlotBytes, total - at);
      std::memcpy(c->slot(c->rank), send + at, n);
      if (!c->barrier())
        return;
      for (int r = 0; r < c->ranks; ++r)
        std::memcpy(recv + size_t(r) * total + at, c->slot(r), n);
      if (!c->barrier())
        return;
    }
  });
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                               size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  size_t e = elementBytes(datatype);
  return collective(
      comm, datatype, stream, "ncclReduceScatter", [=](ncclComm_t c) {
        auto *send = static_cast<const unsigned char *>(sendbuff);
        auto *recv = static_cast<unsigned char *>(recvbuff);
        // A step moves `chunk` elements of every rank's share.
        size_t chunk = std::max<size_t>(1, kSlotBytes / e / size_t(c->ranks));
        for (size_t at = 0; at < recvcount; at += chunk) {
          size_t n = std::min(chunk, recvcount - at);
          for (int r = 0; r < c->ranks; ++r)
            std::memcpy(c->slot(c->rank) + size_t(r) * n * e,
                        send + (size_t(r) * recvcount + at) * e, n * e);
          if (!c->barrier())
            return;
          sumInto(recv + at * e, datatype, n,
                  [&](int r) { return c->slot(r) + size_t(c->rank) * n * e; },
                  c->ranks);
          if (!c->barrier())
            return;
        }
      });
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  size_t e = elementBytes(datatype);
  return collective(comm, datatype, stream, "ncclAllReduce", [=](ncclComm_t c) {
    auto *send = static_cast<const unsigned char *>(sendbuff);
    auto *recv = static_cast<unsigned char *>(recvbuff);
    size_t chunk = kSlotBytes / e;
    for (size_t at = 0; at < count; at += chunk) {
      size_t n = std::min(chunk, count - at);
      std::memcpy(c->slot(c->rank), send + at * e, n * e);
      if (!c->barrier())
        return;
      sumInto(recv + at * e, datatype, n,
              [&](int r) { return c->slot(r); }, c->ranks);
      if (!c->barrier())
        return;
    }
  });
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  if (!comm || peer < 0 || peer >= comm->ranks || peer == comm->rank)
    return ncclInvalidArgument;
  size_t bytes = count * elementBytes(datatype);
  return collective(comm, datatype, stream, "ncclSend", [=](ncclComm_t c) {
    c->send(static_cast<const unsigned char *>(sendbuff), bytes, peer);
  });
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  if (!comm || peer < 0 || peer >= comm->ranks || peer == comm->rank)
    return ncclInvalidArgument;
  size_t bytes = count * elementBytes(datatype);
  return collective(comm, datatype, stream, "ncclRecv", [=](ncclComm_t c) {
    c->recv(static_cast<unsigned char *>(recvbuff), bytes, peer);
  });
}
