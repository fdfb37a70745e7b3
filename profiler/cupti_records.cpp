#include "profiler/cupti_records.h"

#include <cstddef>

namespace ddp::prof {
namespace {

MemKind mem_kind(uint32_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return MemKind::pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return MemKind::pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return MemKind::device;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return MemKind::array;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return MemKind::managed;
    default:
      return MemKind::unknown;
  }
}

SyncKind sync_kind(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return SyncKind::event_synchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return SyncKind::stream_wait_event;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return SyncKind::stream_synchronize;
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return SyncKind::context_synchronize;
    default:
      return SyncKind::unknown;
  }
}

// The fields every device-side record (kernel, memcpy, memset) carries under the same names.
template <typename Record>
void device_fields(const Record* r, ActivityRecord& a) {
  a.device = r->deviceId;
  a.stream = r->streamId;
  a.correlation = r->correlationId;
  a.start = r->start;
  a.end = r->end;
}

template <typename Record>
void memcpy_fields(const Record* m, ActivityRecord& a) {
  a.kind = ActivityKind::memcpy;
  a.src = mem_kind(m->srcKind);
  a.dst = mem_kind(m->dstKind);
  a.bytes = m->bytes;
  device_fields(m, a);
}

void kernel_record(const cupti_record::Kernel* k, ActivityRecord& a) {
  a.kind = ActivityKind::kernel;
  device_fields(k, a);
  a.name = k->name ? k->name : "";
}

void memset_record(const cupti_record::Memset* m, ActivityRecord& a) {
  a.kind = ActivityKind::memset;
  a.dst = mem_kind(m->memoryKind);
  a.bytes = m->bytes;
  device_fields(m, a);
}

void sync_record(const cupti_record::Sync* s, ActivityRecord& a) {
  a.kind = ActivityKind::sync;
  a.sync = sync_kind(s->type);
  a.stream = s->streamId;
  a.correlation = s->correlationId;
  a.start = s->start;
  a.end = s->end;
}

void api_record(const cupti_record::Api* api, bool runtime, CuptiApiNames& names, ActivityRecord& a) {
  a.kind = runtime ? ActivityKind::runtime_api : ActivityKind::driver_api;
  a.thread = api->threadId;
  a.correlation = api->correlationId;
  a.start = api->start;
  a.end = api->end;
  a.name = names.get(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api->cbid);
}

}  // namespace

const std::string& CuptiApiNames::get(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  auto key = (static_cast<uint64_t>(domain) << 32) | cbid;
  auto it = names_.find(key);
  if (it != names_.end()) return it->second;
  const char* n = nullptr;
  std::string s;
  if (cuptiGetCallbackName(domain, cbid, &n) == CUPTI_SUCCESS && n)
    s = n;
  else
    s = (domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "cudaRuntime#" : "cuDriver#") + std::to_string(cbid);
  return names_.emplace(key, std::move(s)).first->second;
}

bool translate_cupti_record(const CUpti_Activity* rec, CuptiApiNames& api_names, ActivityRecord& a) {
  using namespace cupti_record;
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      kernel_record(reinterpret_cast<const Kernel*>(rec), a);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      memcpy_fields(reinterpret_cast<const Memcpy*>(rec), a);
      return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      memcpy_fields(reinterpret_cast<const PeerMemcpy*>(rec), a);
      a.peer = true;
      return true;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      memset_record(reinterpret_cast<const Memset*>(rec), a);
      return true;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      sync_record(reinterpret_cast<const Sync*>(rec), a);
      return true;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      api_record(reinterpret_cast<const Api*>(rec), rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME, api_names, a);
      return true;
    default:
      return false;
  }
}

}  // namespace ddp::prof
