#include "runtime/train/rendezvous_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ddp {
namespace {

// PyTorch >= 2's command numbers and replies (torch/csrc/distributed/c10d/TCPStoreBackend.hpp).
enum Query : uint8_t {
  kValidate = 0,
  kSet = 1,
  kCompareSet = 2,
  kGet = 3,
  kAdd = 4,
  kCheck = 5,
  kWait = 6,
  kGetNumKeys = 7,
  kDeleteKey = 8,
  kAppend = 9,
  kCancelWait = 12,
  kPing = 13,
};
constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint8_t kReady = 0, kNotReady = 1;
constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;

class Frame {
 public:
  explicit Frame(uint8_t cmd) { b_.push_back(cmd); }
  template <typename T>
  Frame& value(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
    return *this;
  }
  Frame& str(const std::string& s) {
    value<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Frame& bytes(const Bytes& v) {
    value<uint64_t>(v.size());
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  const Bytes& data() const { return b_; }

 private:
  Bytes b_;
};

bool send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Waits up to `ms` for input on fd; true when readable (or closed: the next read says which).
bool readable(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, ms);
  return r > 0;
}

std::string endpoint(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

addrinfo* resolve(const std::string& host, int port, bool passive, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return nullptr;
  }
  return res;
}

}  // namespace

// ---- client ---------------------------------------------------------------------------------------------------

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool StoreClient::connect(const std::string& host, int port, std::chrono::milliseconds timeout, std::string& error) {
  where_ = "rendezvous store " + endpoint(host, port);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no address";
  for (;;) {
    addrinfo* res = resolve(host, port, false, error);
    if (!res) return false;
    for (addrinfo* a = res; a && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last = std::strerror(errno);
        ::close(fd);
      }
    }
    ::freeaddrinfo(res);
    if (fd_ >= 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      error = "cannot connect to the " + where_ + " within " + std::to_string(timeout.count() / 1000) + " s: " + last;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Frame f(kValidate);
  f.value<uint32_t>(kValidationMagic);
  if (!send_all(fd_, f.data().data(), f.data().size())) {
    error = "cannot talk to the " + where_ + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

void StoreClient::fail(const std::string& what) { throw std::runtime_error(where_ + ": " + what); }

void StoreClient::send(const Bytes& frame) {
  if (!send_all(fd_, frame.data(), frame.size())) fail(std::string("connection lost: ") + std::strerror(errno));
}

void StoreClient::recv(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    ssize_t k = ::recv(fd_, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      fail(k == 0 ? "connection closed by the store" : std::string("connection lost: ") + std::strerror(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

Bytes StoreClient::recv_bytes() {
  uint64_t n = 0;
  recv(&n, sizeof(n));
  Bytes v(n);
  if (n) recv(v.data(), n);
  return v;
}

void StoreClient::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  send(Frame(kSet).str(key).bytes(value).data());
}

Bytes StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_locked({key}, timeout);
  send(Frame(kGet).str(key).data());
  return recv_bytes();
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  send(Frame(kAdd).str(key).value<int64_t>(delta).data());
  int64_t v = 0;
  recv(&v, sizeof(v));
  return v;
}

Bytes StoreClient::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  send(Frame(kCompareSet).str(key).bytes(expected).bytes(desired).data());
  return recv_bytes();
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  Frame f(kCheck);
  f.value<uint64_t>(keys.size());
  for (const auto& k : keys) f.str(k);
  send(f.data());
  uint8_t r = 0;
  recv(&r, 1);
  return r == kReady;
}

void StoreClient::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  wait_locked(keys, timeout);
}

void StoreClient::wait_locked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Frame f(kWait);
  f.value<uint64_t>(keys.size());
  for (const auto& k : keys) f.str(k);
  send(f.data());
  uint8_t r = 0;
  if (readable(fd_, static_cast<int>(timeout.count()))) {
    recv(&r, 1);
    if (r != kStopWaiting) fail("unexpected reply to WAIT");
    return;
  }
  // Timed out: withdraw the wait. The server may have answered in between; then both replies arrive.
  send(Frame(kCancelWait).data());
  recv(&r, 1);
  if (r == kStopWaiting) recv(&r, 1);
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
  fail("timed out after " + std::to_string(timeout.count() / 1000) + " s waiting for " + names);
}

bool StoreClient::remove(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  send(Frame(kDeleteKey).str(key).data());
  int64_t n = 0;
  recv(&n, sizeof(n));
  return n == 1;
}

int64_t StoreClient::num_keys() {
  std::lock_guard<std::mutex> lock(mu_);
  send(Frame(kGetNumKeys).data());
  int64_t n = 0;
  recv(&n, sizeof(n));
  return n;
}

// ---- server ---------------------------------------------------------------------------------------------------

StoreServer::~StoreServer() { stop(); }

bool StoreServer::start(const std::string& host, int port, std::string& error) {
  addrinfo* res = resolve(host, port, false, error);
  if (!res) return false;
  std::string last = "no address";
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    } else {
      last = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) {
    error = "cannot listen for the rendezvous on " + endpoint(host, port) + ": " + last;
    return false;
  }
  acceptor_ = std::thread([this] { accept_loop(); });
  return true;
}

void StoreServer::stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    conns.swap(connections_);
  }
  changed_.notify_all();
  for (auto& t : conns) t.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void StoreServer::accept_loop() {
  while (!stopping_) {
    if (!readable(listen_fd_, 100)) continue;
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(conn_mu_);
    connections_.emplace_back([this, fd] {
      serve(fd);
      ::close(fd);
    });
  }
}

namespace {
// Reads exactly n bytes, giving up when the peer closes or the server stops.
bool read_exact(int fd, void* out, size_t n, const std::atomic<bool>& stopping) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    if (stopping) return false;
    if (!readable(fd, 100)) continue;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
}  // namespace

// A WAIT: answered when every key exists, or withdrawn by the client's CANCEL_WAIT.
bool StoreServer::wait_for_keys(int fd, const std::vector<std::string>& keys) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    bool all = true;
    for (const auto& k : keys) all = all && data_.count(k);
    if (all) {
      lock.unlock();
      return send_all(fd, &kStopWaiting, 1);
    }
    if (stopping_) return false;
    changed_.wait_for(lock, std::chrono::milliseconds(50));
    if (readable(fd, 0)) {
      lock.unlock();
      uint8_t cmd = 0;
      if (!read_exact(fd, &cmd, 1, stopping_) || cmd != kCancelWait) return false;
      return send_all(fd, &kWaitCanceled, 1);
    }
  }
}

void StoreServer::serve(int fd) {
  auto read_u64 = [&](uint64_t& v) { return read_exact(fd, &v, sizeof(v), stopping_); };
  // Keys and values are small (addresses, run folders, manifests); a length beyond this is a stranger's bytes.
  constexpr uint64_t kMaxItem = 64u << 20;
  auto read_bytes = [&](Bytes& v) {
    uint64_t n = 0;
    if (!read_u64(n) || n > kMaxItem) return false;
    v.resize(n);
    return n == 0 || read_exact(fd, v.data(), n, stopping_);
  };
  auto read_str = [&](std::string& s) {
    Bytes b;
    if (!read_bytes(b)) return false;
    s.assign(b.begin(), b.end());
    return true;
  };
  auto reply_bytes = [&](const Bytes& v) {
    uint64_t n = v.size();
    return send_all(fd, reinterpret_cast<const uint8_t*>(&n), sizeof(n)) && send_all(fd, v.data(), v.size());
  };
  auto reply_i64 = [&](int64_t v) { return send_all(fd, reinterpret_cast<const uint8_t*>(&v), sizeof(v)); };
  auto read_keys = [&](std::vector<std::string>& keys) {
    uint64_t n = 0;
    if (!read_u64(n) || n > 1u << 20) return false;
    keys.resize(n);
    for (auto& k : keys)
      if (!read_str(k)) return false;
    return true;
  };

  // The first frame must be PyTorch's VALIDATE with its magic number: anything else is not a store client.
  uint8_t cmd = 0;
  uint32_t magic = 0;
  if (!read_exact(fd, &cmd, 1, stopping_) || cmd != kValidate || !read_exact(fd, &magic, 4, stopping_) ||
      magic != kValidationMagic)
    return;
  while (read_exact(fd, &cmd, 1, stopping_)) {
    std::string key;
    Bytes a, b;
    std::vector<std::string> keys;
    bool ok = true;
    switch (cmd) {
      case kSet:
      case kAppend:
        ok = read_str(key) && read_bytes(a);
        if (ok) {
          std::lock_guard<std::mutex> lock(mu_);
          Bytes& v = data_[key];
          if (cmd == kSet)
            v = a;
          else
            v.insert(v.end(), a.begin(), a.end());
          changed_.notify_all();
        }
        break;
      case kGet: {
        ok = read_str(key);
        Bytes v;
        if (ok) {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = data_.find(key);
          if (it != data_.end()) v = it->second;
        }
        ok = ok && reply_bytes(v);
        break;
      }
      case kCompareSet: {
        ok = read_str(key) && read_bytes(a) && read_bytes(b);
        Bytes now;
        if (ok) {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = data_.find(key);
          if (it == data_.end()) {
            if (a.empty()) data_[key] = b;
            now = a.empty() ? b : a;
          } else {
            if (it->second == a) it->second = b;
            now = it->second;
          }
          changed_.notify_all();
        }
        ok = ok && reply_bytes(now);
        break;
      }
      case kAdd: {
        int64_t delta = 0;
        ok = read_str(key) && read_exact(fd, &delta, sizeof(delta), stopping_);
        int64_t v = 0;
        if (ok) {
          std::lock_guard<std::mutex> lock(mu_);
          Bytes& cur = data_[key];
          // Counters are stored as decimal text, as PyTorch's store does (a get() of the key reads the number).
          if (!cur.empty()) v = std::strtoll(std::string(cur.begin(), cur.end()).c_str(), nullptr, 10);
          v += delta;
          std::string s = std::to_string(v);
          cur.assign(s.begin(), s.end());
          changed_.notify_all();
        }
        ok = ok && reply_i64(v);
        break;
      }
      case kCheck: {
        ok = read_keys(keys);
        bool all = true;
        if (ok) {
          std::lock_guard<std::mutex> lock(mu_);
          for (const auto& k : keys) all = all && data_.count(k);
        }
        const uint8_t r = all ? kReady : kNotReady;
        ok = ok && send_all(fd, &r, 1);
        break;
      }
      case kWait:
        ok = read_keys(keys) && wait_for_keys(fd, keys);
        break;
      case kCancelWait:  // a cancel that crossed the server's STOP_WAITING
        ok = send_all(fd, &kWaitCanceled, 1);
        break;
      case kGetNumKeys: {
        int64_t n = 0;
        {
          std::lock_guard<std::mutex> lock(mu_);
          n = static_cast<int64_t>(data_.size());
        }
        ok = reply_i64(n);
        break;
      }
      case kDeleteKey: {
        ok = read_str(key);
        int64_t n = 0;
        if (ok) {
          std::lock_guard<std::mutex> lock(mu_);
          n = static_cast<int64_t>(data_.erase(key));
        }
        ok = ok && reply_i64(n);
        break;
      }
      case kPing: {
        uint32_t nonce = 0;
        ok = read_exact(fd, &nonce, sizeof(nonce), stopping_) &&
             send_all(fd, reinterpret_cast<const uint8_t*>(&nonce), sizeof(nonce));
        break;
      }
      default:
        ok = false;  // a command this store does not serve: drop the connection rather than misread its bytes
    }
    if (!ok) return;
  }
}

}  // namespace ddp
