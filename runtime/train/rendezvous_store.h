#pragma once
// The rendezvous key-value store the ranks meet through, spoken in PyTorch >= 2's TCPStore wire protocol (a
// VALIDATE with its magic number, then SET/GET/ADD/CHECK/WAIT/... frames: one command byte, strings and byte arrays
// as a u64 length and the bytes, integers little-endian).
//
// Why our own and not LibTorch 1.13's c10d::TCPStore: (1) its client speaks the older protocol (no VALIDATE, every
// command number shifted by one), so it cannot talk to the store torchrun's agent (torch >= 2) already hosts on
// MASTER_PORT; (2) its server listens on every interface and has no bind-address option, so anyone who can reach the
// host could write into a running job's store. StoreServer listens on exactly one address (MASTER_ADDR: loopback
// for supervisor runs).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ddp {

using Bytes = std::vector<uint8_t>;

// One connection to a store (ours or torchrun's agent). Calls are serialised; failures throw std::runtime_error
// naming the store's address.
class StoreClient {
 public:
  ~StoreClient();
  // Connects (retrying until `timeout`: the server may still be starting) and validates the connection.
  bool connect(const std::string& host, int port, std::chrono::milliseconds timeout, std::string& error);
  void set(const std::string& key, const Bytes& value);
  Bytes get(const std::string& key, std::chrono::milliseconds timeout);  // waits for the key first
  int64_t add(const std::string& key, int64_t delta);
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired);
  bool check(const std::vector<std::string>& keys);
  // Blocks until every key exists; throws when `timeout` passes first.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  bool remove(const std::string& key);
  int64_t num_keys();

 private:
  void send(const Bytes& frame);
  void recv(void* out, size_t n);
  Bytes recv_bytes();
  void wait_locked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  [[noreturn]] void fail(const std::string& what);
  int fd_ = -1;
  std::string where_;
  std::mutex mu_;
};

// A store server on one address. Each connection is served by its own thread; stop() (or the destructor) ends them.
class StoreServer {
 public:
  ~StoreServer();
  // Listens on host:port; port 0 picks a free one. Never binds to the wildcard address.
  bool start(const std::string& host, int port, std::string& error);
  int port() const { return port_; }
  void stop();

 private:
  void accept_loop();
  void serve(int fd);
  bool wait_for_keys(int fd, const std::vector<std::string>& keys);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::vector<std::thread> connections_;
  std::mutex conn_mu_;
  std::mutex mu_;  // guards data_
  std::condition_variable changed_;
  std::map<std::string, Bytes> data_;
};

}  // namespace ddp
