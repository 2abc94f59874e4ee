// braid's torch.distributed backend (see process_group.hpp).
#include "process_group.hpp"

#include <cstdio>
#include <cstring>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace braid_torch {
namespace {

// Throws torch's error (a RuntimeError in Python) with braid's message.
void check(braid_status_t st, const char* what) {
  TORCH_CHECK(st == BRAID_OK, "braid ", what, " failed (",
              braid_status_str(st), "): ", braid_last_error());
}

braid_dtype_t dtype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return BRAID_F32;
    case at::kDouble: return BRAID_F64;
    case at::kHalf: return BRAID_F16;
    case at::kBFloat16: return BRAID_BF16;
    case at::kInt: return BRAID_I32;
    case at::kLong: return BRAID_I64;
    case at::kByte: return BRAID_U8;
    default:
      TORCH_CHECK(false, "braid: tensors of dtype ", t.scalar_type(),
                  " are not supported (float32, float64, float16, bfloat16,"
                  " int32, int64, uint8 are)");
  }
}

braid_op_t op_of(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return BRAID_SUM;
    case c10d::ReduceOp::AVG: return BRAID_AVG;
    case c10d::ReduceOp::PRODUCT: return BRAID_PROD;
    case c10d::ReduceOp::MIN: return BRAID_MIN;
    case c10d::ReduceOp::MAX: return BRAID_MAX;
    default:
      TORCH_CHECK(false, "braid: reduce op ", static_cast<int>(op.op_),
                  " is not supported (SUM, AVG, PRODUCT, MIN, MAX are)");
  }
}

// What braid can read and write in place: one dense CPU tensor.
const at::Tensor& usable(const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "braid: tensor on ", t.device(),
              ": only CPU tensors for now (device buffers come with the "
              "NCCL plugin)");
  TORCH_CHECK(t.is_contiguous(), "braid: tensors must be contiguous");
  return t;
}

const at::Tensor& only(const std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1, "braid: ", what, " takes one tensor per rank, "
              "got ", ts.size());
  return usable(ts[0]);
}

// Done when returned: the collective ran in the caller's thread.
class BraidWork : public c10d::Work {
 public:
  BraidWork(c10d::OpType op, std::vector<at::Tensor> result)
      : c10d::Work(-1, op), result_(std::move(result)) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    future_->markCompleted(c10::IValue(result_));
    finish();
  }
  std::vector<at::Tensor> result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

 private:
  std::vector<at::Tensor> result_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> done(c10d::OpType op,
                                    std::vector<at::Tensor> result) {
  return c10::make_intrusive<BraidWork>(op, std::move(result));
}

// braid_kv_t over torch's Store.
int kv_set(void* ctx, const char* key, const void* value, size_t len,
           char* err, size_t errlen) {
  auto* store = static_cast<c10d::Store*>(ctx);
  try {
    const auto* p = static_cast<const uint8_t*>(value);
    store->set(key, std::vector<uint8_t>(p, p + len));
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "torch store: %s", e.what());
    return -1;
  }
}

long kv_get(void* ctx, const char* key, void* value, size_t cap, char* err,
            size_t errlen) {
  auto* store = static_cast<c10d::Store*>(ctx);
  try {
    std::vector<uint8_t> v = store->get(key);
    std::memcpy(value, v.data(), v.size() < cap ? v.size() : cap);
    return static_cast<long>(v.size());
  } catch (const std::exception& e) {
    std::snprintf(err, errlen, "torch store: %s", e.what());
    return -1;
  }
}

// The host of the TCPStore under the group's prefixes, if it is one: rank 0
// listens on the interface facing it.
std::string store_host(c10::intrusive_ptr<c10d::Store> s) {
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(s.get()))
    s = prefix->getUnderlyingStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(s.get()))
    return tcp->getHost();
  return "";
}

}  // namespace

ProcessGroupBraid::ProcessGroupBraid(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
    : c10d::ProcessGroup(rank, size) {
  std::string host = store_host(store);
  braid_kv_t kv{};
  kv.ctx = store.get();
  kv.set = kv_set;
  kv.get = kv_get;
  kv.host = host.empty() ? nullptr : host.c_str();
  check(braid_init_kv(&comm_, rank, size, &kv), "init");
}

ProcessGroupBraid::~ProcessGroupBraid() {
  if (comm_ != nullptr && braid_finalize(comm_) != BRAID_OK)
    std::fprintf(stderr, "braid: finalize: %s\n", braid_last_error());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = only(tensors, "broadcast");
  std::lock_guard<std::mutex> lock(mutex_);
  check(braid_broadcast(t.data_ptr(), t.numel(), dtype_of(t),
                        static_cast<int>(opts.rootRank), comm_),
        "broadcast");
  return done(c10d::OpType::BROADCAST, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = only(tensors, "all_reduce");
  std::lock_guard<std::mutex> lock(mutex_);
  check(braid_allreduce(t.data_ptr(), t.data_ptr(), t.numel(), dtype_of(t),
                        op_of(opts.reduceOp), comm_),
        "all_reduce");
  return done(c10d::OpType::ALLREDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  usable(input);
  usable(output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                  output.numel() == input.numel() * getSize(),
              "braid: all_gather output must hold world size times the "
              "input, of the same dtype");
  std::lock_guard<std::mutex> lock(mutex_);
  check(braid_allgather(input.data_ptr(), output.data_ptr(), input.numel(),
                        dtype_of(input), comm_),
        "all_gather");
  return done(c10d::OpType::_ALLGATHER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = only(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1 &&
                  outputs[0].size() == static_cast<size_t>(getSize()),
              "braid: all_gather needs one list of world-size tensors");
  // Into one contiguous buffer, then out to the user's tensors.
  at::Tensor flat = at::empty({in.numel() * getSize()}, in.options());
  at::Tensor input = in;
  _allgather_base(flat, input, opts);
  for (int r = 0; r < getSize(); r++) {
    at::Tensor& o = outputs[0][r];
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "braid: all_gather output ", r, " does not match the input");
    o.copy_(flat.narrow(0, r * in.numel(), in.numel()).view(o.sizes()));
  }
  return done(c10d::OpType::ALLGATHER, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  usable(input);
  usable(output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() &&
                  input.numel() == output.numel() * getSize(),
              "braid: reduce_scatter input must hold world size times the "
              "output, of the same dtype");
  std::lock_guard<std::mutex> lock(mutex_);
  check(braid_reduce_scatter(input.data_ptr(), output.data_ptr(),
                             output.numel(), dtype_of(output),
                             op_of(opts.reduceOp), comm_),
        "reduce_scatter");
  return done(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = only(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 &&
                  inputs[0].size() == static_cast<size_t>(getSize()),
              "braid: reduce_scatter needs one list of world-size tensors");
  std::vector<at::Tensor> flat_in;
  for (const at::Tensor& t : inputs[0]) {
    TORCH_CHECK(t.numel() == out.numel() && t.scalar_type() == out.scalar_type(),
                "braid: reduce_scatter inputs must match the output");
    flat_in.push_back(t.reshape({-1}));
  }
  at::Tensor flat = at::cat(flat_in);
  _reduce_scatter_base(out, flat, opts);
  return done(c10d::OpType::REDUCE_SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupBraid::barrier(
    const c10d::BarrierOptions&) {
  std::lock_guard<std::mutex> lock(mutex_);
  check(braid_barrier(comm_), "barrier");
  return done(c10d::OpType::BARRIER, {});
}

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroupBraid::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const std::chrono::duration<float>&) {
  return c10::make_intrusive<ProcessGroupBraid>(store, rank, size);
}

}  // namespace braid_torch
