#pragma once
// A port for a rendezvous this process starts itself (the supervisor's ranks, the integration tests' torchrun).

namespace ddp {
// A TCP port free on 127.0.0.1 right now (the kernel's pick), or -1. Another process may take it before it is used:
// callers bind it soon after.
int free_loopback_port();
}  // namespace ddp
