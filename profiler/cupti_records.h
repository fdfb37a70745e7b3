#pragma once
// CUPTI activity records -> ActivityRecord (builds with DDP_PROFILE_CUPTI=1 only). A pure translation, apart from the
// API-name lookup: tests feed it hand-made records, no GPU needed.
#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "profiler/gpu_activity.h"

// The record struct each activity kind we enable is delivered in. cupti_activity.h names it in the kind's
// documentation, and a new toolkit may move a kind to a new struct version: these were read off CUPTI_API_VERSION
// 130001 (CUDA 13.0 Update 1), the toolkit docs/gpu.md requires. A newer struct version only appends fields, so a newer
// CUPTI still reads correctly through these; an older toolkit lacks some of them, hence the floor.
#if !defined(CUPTI_API_VERSION) || CUPTI_API_VERSION < 130000
#error "profiler/cupti_records.h: the CUPTI record structs below are those of CUDA 13.0 (CUPTI_API_VERSION 130000+)"
#endif

namespace ddp::prof::cupti_record {
using Kernel = CUpti_ActivityKernel10;         // CUPTI_ACTIVITY_KIND_KERNEL, _CONCURRENT_KERNEL
using Memcpy = CUpti_ActivityMemcpy6;          // CUPTI_ACTIVITY_KIND_MEMCPY
using PeerMemcpy = CUpti_ActivityMemcpyPtoP4;  // CUPTI_ACTIVITY_KIND_MEMCPY2
using Memset = CUpti_ActivityMemset4;          // CUPTI_ACTIVITY_KIND_MEMSET
using Sync = CUpti_ActivitySynchronization2;   // CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
using Api = CUpti_ActivityAPI;                 // CUPTI_ACTIVITY_KIND_RUNTIME, _DRIVER

// translate_cupti_record reads a CUpti_Activity* as one of these: every one must start with the kind, and the fields
// read must have the widths the translation assumes.
template <typename Record>
constexpr bool starts_with_kind = offsetof(Record, kind) == 0 && sizeof(Record::kind) == sizeof(CUpti_ActivityKind);
static_assert(starts_with_kind<Kernel> && starts_with_kind<Memcpy> && starts_with_kind<PeerMemcpy> &&
              starts_with_kind<Memset> && starts_with_kind<Sync> && starts_with_kind<Api>);
static_assert(sizeof(Kernel::start) == 8 && sizeof(Kernel::end) == 8 && sizeof(Kernel::correlationId) == 4);
static_assert(sizeof(Memcpy::srcKind) == 1 && sizeof(Memcpy::dstKind) == 1 && sizeof(Memcpy::bytes) == 8);
static_assert(sizeof(PeerMemcpy::srcKind) == 1 && sizeof(PeerMemcpy::dstKind) == 1);
static_assert(sizeof(Memset::bytes) == 8 && sizeof(Memset::memoryKind) <= 4);
static_assert(sizeof(Sync::start) == 8 && sizeof(Api::start) == 8 && sizeof(Api::threadId) == 4);
}  // namespace ddp::prof::cupti_record

namespace ddp::prof {

// cuptiGetCallbackName's text per (domain, callback id), cached: an ActivityRecord's name views it, so it must outlive
// the delivery of the record.
class CuptiApiNames {
 public:
  const std::string& get(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

 private:
  std::map<uint64_t, std::string> names_;
};

// One record of a kind we enable -> `out`; false for any other kind. `out.name` views the kernel record's name or
// `api_names`' cache: valid while the record's buffer and `api_names` are.
bool translate_cupti_record(const CUpti_Activity* rec, CuptiApiNames& api_names, ActivityRecord& out);

}  // namespace ddp::prof
