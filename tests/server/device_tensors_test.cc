// Tensors in CUDA shared memory through the backend's batch I/O, on the CPU: host memory stands in
// for the client's GPU memory and a recording path for a GPU's (it copies as cudaMemcpyDefault
// would). A batch of several requests hands the device path one piece a request, in batch order; each
// request's rows of an output go to its own region, a region too small fails that request alone; the
// host never reads or writes those bytes itself; the CPU's own path refuses them by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "server/backend/torch_batch_io.h"
#include "server/backend/torch_device_path.h"

namespace chronoserve {
namespace {

using server::Batch;
using server::BytePiece;
using server::InferRequest;
using ::testing::HasSubstr;

// A path that reads and writes "device" memory directly, as a GPU path does: it records the pieces
// each input arrived in and copies outputs into their destinations.
class RecordingDevicePath final : public server::DevicePath {
 public:
  torch::Device device() const override { return torch::kCPU; }
  bool device_timed() const override { return false; }
  bool direct_pinned_io() const override { return true; }
  std::shared_ptr<void> Enter() override { return nullptr; }
  absl::StatusOr<std::shared_ptr<char>> AllocateHost(size_t bytes) const override {
    return std::shared_ptr<char>(new char[bytes], std::default_delete<char[]>());
  }
  void SelectSlot(int) override {}
  absl::Status BeginInputs(const server::InputsPlan&) override { return absl::OkStatus(); }
  absl::StatusOr<char*> Staging(int, size_t bytes) override {
    if (!staging_fail_.ok()) return staging_fail_;
    staging_.resize(bytes);
    ++staged_;
    return staging_.data();
  }
  absl::StatusOr<torch::Tensor> ToDevice(int input, absl::Span<const BytePiece> pieces,
                                         const std::vector<int64_t>& shape, torch::ScalarType type) override {
    if (!fail_.ok()) return fail_;
    pieces_.assign(pieces.begin(), pieces.end());
    gathered_.clear();
    for (const BytePiece& p : pieces) gathered_.append(p.data, p.bytes);
    return torch::from_blob(gathered_.data(), shape, torch::TensorOptions().dtype(type));
  }
  absl::Status ToDeviceInto(int, absl::Span<const BytePiece>, size_t, const torch::Tensor&) override {
    return absl::UnimplementedError("not used here");
  }
  absl::Status InputsReady() override { return absl::OkStatus(); }
  absl::StatusOr<const char*> ToHost(int, const torch::Tensor& tensor) override {
    ++to_host_;
    landed_ = tensor.contiguous();
    return static_cast<const char*>(landed_.data_ptr());
  }
  absl::Status CopyOutInto(int, const torch::Tensor& tensor, char* dst) override {
    const torch::Tensor src = tensor.contiguous();
    std::memcpy(dst, src.data_ptr(), src.nbytes());
    copies_into_.push_back(dst);
    return absl::OkStatus();
  }
  absl::Status CopyOutsInto(int output, const torch::Tensor& tensor,
                            absl::Span<const server::RowsTarget> targets) override {
    if (!fail_.ok()) return fail_;
    outs_calls_.push_back({});
    for (const server::RowsTarget& t : targets) outs_calls_.back().push_back(t.device);
    targets_.insert(targets_.end(), targets.begin(), targets.end());
    return DevicePath::CopyOutsInto(output, tensor, targets);  // one CopyOutInto each
  }
  server::LentBytes LendHost(int, const char*, size_t) override { return {}; }
  absl::Status Mark(server::Marker) override { return absl::OkStatus(); }
  absl::Status Wait() override { return absl::OkStatus(); }
  bool Done() override { return true; }
  absl::Status Sync() override { return absl::OkStatus(); }
  absl::StatusOr<int64_t> SpanNs(server::Marker, server::Marker) override { return 0; }

  absl::Status fail_;  // not OK: ToDevice and CopyOutsInto return it, as a failed copy would
  absl::Status staging_fail_;  // not OK: Staging returns it, as a failed page-locked allocation would
  std::vector<BytePiece> pieces_;
  std::string gathered_;
  std::vector<char> staging_;
  int staged_ = 0;
  int to_host_ = 0;
  torch::Tensor landed_;
  std::vector<char*> copies_into_;
  std::vector<std::vector<int>> outs_calls_;  // per CopyOutsInto call: its targets' GPUs
  std::vector<server::RowsTarget> targets_;   // every CopyOutsInto call's, in order
};

server::ModelSpec Spec() {
  server::ModelSpec spec;
  spec.name = "dev";
  spec.max_batch_size = 8;
  spec.inputs = {{"INPUT__0", DataType::kFp32, {3}}};
  spec.outputs = {{"OUTPUT__0", DataType::kFp32, {2}}};
  return spec;
}

// `items` rows of 3 floats (never zero) in `fake_gpu` at `offset`, marked as CUDA shared memory
// (the region `region`).
std::unique_ptr<InferRequest> DeviceRequest(std::vector<float>& fake_gpu, size_t offset, int64_t items,
                                            absl::string_view region = "in") {
  for (int64_t i = 0; i < items * 3; ++i) fake_gpu[offset + i] = 1.5f + static_cast<float>(offset + i);
  auto r = std::make_unique<InferRequest>();
  r->batch_items = items;
  server::InputTensor in;
  in.index = 0;
  in.dtype = DataType::kFp32;
  in.shape = {items, 3};
  in.data = reinterpret_cast<const char*>(fake_gpu.data() + offset);
  in.byte_size = static_cast<size_t>(items) * 3 * sizeof(float);
  in.shared_memory = true;
  in.region = region;
  in.device_id = 2;
  r->inputs.push_back(std::move(in));
  return r;
}

void OutputToRegion(InferRequest& r, char* region, size_t capacity, absl::string_view name = "out") {
  server::OutputTensor out;
  out.index = 0;
  out.raw = region;
  out.raw_capacity = capacity;
  out.raw_name = absl::StrCat("CUDA shared-memory region '", name, "'");
  out.raw_device_id = 1;
  out.shape = {r.batch_items, 2};
  r.outputs.push_back(std::move(out));
}

TEST(DeviceTensorsTest, SeveralRequestsInputsReachThePathAsOnePieceEachInBatchOrder) {
  std::vector<float> fake_gpu(64, 0.0f);
  Batch batch;
  batch.push_back(DeviceRequest(fake_gpu, 30, 2));
  batch.push_back(DeviceRequest(fake_gpu, 0, 1));
  batch.push_back(DeviceRequest(fake_gpu, 12, 3));
  RecordingDevicePath path;
  auto staged = server::GatherInputs(Spec(), batch, path);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_EQ(staged->size(), 1u);
  const server::StagedInput& in = (*staged)[0];
  EXPECT_TRUE(in.in_place) << "nothing gathered on the host";
  EXPECT_EQ(path.staged_, 0) << "no staging buffer asked for";
  EXPECT_EQ(in.bytes, 6u * 3 * sizeof(float));
  EXPECT_EQ(in.shape, (std::vector<int64_t>{6, 3}));
  auto tensor = path.ToDevice(0, in.pieces, in.shape, torch::kFloat32);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  ASSERT_EQ(path.pieces_.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(path.pieces_[k].data, batch[k]->inputs[0].data) << "piece " << k << " is request " << k << "'s";
    EXPECT_EQ(path.pieces_[k].bytes, batch[k]->inputs[0].byte_size);
    EXPECT_EQ(path.pieces_[k].device, 2) << "each piece says its GPU";
  }
  EXPECT_FLOAT_EQ(tensor->index({0, 0}).item<float>(), 1.5f + 30) << "request 0's first row first";
  EXPECT_FLOAT_EQ(tensor->index({2, 0}).item<float>(), 1.5f + 0) << "then request 1's";
  EXPECT_FLOAT_EQ(tensor->index({5, 2}).item<float>(), 1.5f + 12 + 8) << "request 2's last value last";

  // One request: its bytes as the one run, in place.
  Batch one;
  one.push_back(DeviceRequest(fake_gpu, 40, 2));
  auto single = server::GatherInputs(Spec(), one, path);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ((*single)[0].pieces.size(), 1u);
  EXPECT_EQ((*single)[0].pieces[0].data, one[0]->inputs[0].data);
  EXPECT_EQ((*single)[0].pieces[0].bytes, one[0]->inputs[0].byte_size);
  EXPECT_EQ((*single)[0].data, one[0]->inputs[0].data);
}

TEST(DeviceTensorsTest, EachRequestsRowsGoToItsOwnRegionAndATooSmallOneFailsAlone) {
  std::vector<float> fake_gpu(64, 0.0f);
  Batch batch;
  batch.push_back(DeviceRequest(fake_gpu, 0, 2));
  batch.push_back(DeviceRequest(fake_gpu, 6, 1));
  batch.push_back(DeviceRequest(fake_gpu, 9, 3));
  std::vector<std::vector<char>> regions = {std::vector<char>(64, 'x'), std::vector<char>(4, 'x'),
                                            std::vector<char>(64, 'x')};
  OutputToRegion(*batch[0], regions[0].data(), regions[0].size());
  OutputToRegion(*batch[1], regions[1].data(), regions[1].size());  // needs 8 bytes: too small
  std::string in_message;
  server::OutputTensor host_out;  // request 2 takes the output in the message
  host_out.index = 0;
  host_out.data = &in_message;
  host_out.shape = {3, 2};
  batch[2]->outputs.push_back(std::move(host_out));

  const torch::Tensor output = torch::arange(12, torch::kFloat32).view({6, 2}) + 0.5f;
  RecordingDevicePath path;
  ASSERT_TRUE(server::CopyOutputsToDevice(Spec(), batch, 0, output, path).ok());
  ASSERT_EQ(path.copies_into_.size(), 1u) << "request 1's region was too small: no copy for it";
  ASSERT_EQ(path.outs_calls_.size(), 1u) << "the batch's rows for one output go to the path together";
  EXPECT_EQ(path.outs_calls_[0], (std::vector<int>{1})) << "each target says its region's GPU";
  EXPECT_EQ(path.copies_into_[0], regions[0].data());
  EXPECT_EQ(std::memcmp(regions[0].data(), output.data_ptr(), 2 * 2 * sizeof(float)), 0) << "rows 0-1";
  EXPECT_EQ(regions[1], std::vector<char>(4, 'x')) << "nothing written past what the region holds";
  EXPECT_TRUE(batch[0]->status.ok());
  EXPECT_EQ(batch[1]->status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(batch[1]->status.message()),
              HasSubstr("model 'dev' output 'OUTPUT__0': CUDA shared-memory region 'out' is too small: the output "
                        "needs 8 bytes, 4 available"));
  EXPECT_TRUE(batch[2]->status.ok());

  // Request 2 wants it on the host: landed once, and the scatter copies its rows (4-5) and skips
  // the device destinations.
  ASSERT_TRUE(server::WantedOnHost(batch, 0));
  auto landed = path.ToHost(0, output);
  ASSERT_TRUE(landed.ok());
  server::ScatterOutputs(Spec(), batch, {output}, {*landed}, 6, path, SteadyClock::Get());
  EXPECT_EQ(in_message, std::string(static_cast<const char*>(output.data_ptr()) + 3 * 2 * sizeof(float),
                                    3 * 2 * sizeof(float)));
  EXPECT_EQ(batch[0]->outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(batch[1]->status.code(), absl::StatusCode::kInvalidArgument) << "its error is kept";

  // All of them in GPU memory: nothing needs the host.
  batch.pop_back();
  EXPECT_FALSE(server::WantedOnHost(batch, 0));
}

// A GPU path copies each target as bytes [offset, offset + bytes) of the output (one kernel for
// them all); the base path copies the rows as a view (TargetRows). Both are the same rows, for
// every request.
TEST(DeviceTensorsTest, ATargetsBytesAreItsRows) {
  std::vector<float> fake_gpu(64, 0.0f);
  Batch batch;
  const int64_t items[] = {2, 1, 3};
  std::vector<std::vector<char>> regions;
  for (size_t i = 0; i < 3; ++i) {
    batch.push_back(DeviceRequest(fake_gpu, 10 * i, items[i]));
    regions.emplace_back(64, 'x');
  }
  for (size_t i = 0; i < 3; ++i) OutputToRegion(*batch[i], regions[i].data(), regions[i].size());
  const torch::Tensor output = torch::arange(12, torch::kFloat32).view({6, 2}) * 0.25f + 1.0f;
  RecordingDevicePath path;
  ASSERT_TRUE(server::CopyOutputsToDevice(Spec(), batch, 0, output, path).ok());
  ASSERT_EQ(path.targets_.size(), 3u);
  const size_t row_bytes = 2 * sizeof(float);
  const size_t offsets[] = {0, 2 * row_bytes, 3 * row_bytes};
  const char* base = static_cast<const char*>(output.data_ptr());
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    const server::RowsTarget& t = path.targets_[i];
    EXPECT_EQ(t.offset, offsets[i]);
    EXPECT_EQ(t.bytes, static_cast<size_t>(items[i]) * row_bytes);
    const torch::Tensor rows = server::TargetRows(output, t);
    EXPECT_EQ(rows.size(0), items[i]);
    EXPECT_EQ(static_cast<const char*>(rows.data_ptr()), base + t.offset) << "the view starts at the target's bytes";
    EXPECT_EQ(t.dst, regions[i].data());
    EXPECT_EQ(std::memcmp(regions[i].data(), base + t.offset, t.bytes), 0) << "the rows the view copied";
    EXPECT_EQ(regions[i][t.bytes], 'x') << "nothing past them";
    EXPECT_TRUE(batch[i]->status.ok()) << batch[i]->status;
  }
}

// A failed copy (a kernel launch, a cudaMemcpyAsync) fails the batch; its error says which tensor
// and which regions, each once, a few of them then how many more, and keeps the path's code.
TEST(DeviceTensorsTest, AFailedCopyNamesTheTensorAndTheRegionsItInvolved) {
  std::vector<float> fake_gpu(64, 0.0f);
  Batch batch;
  const char* names[] = {"a", "b", "a", "c", "d"};
  for (size_t i = 0; i < 5; ++i) batch.push_back(DeviceRequest(fake_gpu, 6 * i, 2, names[i]));
  RecordingDevicePath path;
  path.fail_ = absl::InternalError("copying inputs out of CUDA shared-memory regions: invalid argument");
  auto staged = server::GatherInputs(Spec(), batch, path);
  ASSERT_TRUE(staged.ok()) << staged.status();
  const server::StagedInput& in = (*staged)[0];
  const absl::Status copied = path.ToDevice(0, in.pieces, in.shape, torch::kFloat32).status();
  ASSERT_FALSE(copied.ok());
  const absl::Status named = server::InputCopyError(Spec(), batch, 0, in.bytes, copied);
  EXPECT_EQ(named.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(named.message(),
            "input 'INPUT__0' (120 bytes) to the device from shared-memory regions 'a', 'b', 'c' and 1 more: "
            "copying inputs out of CUDA shared-memory regions: invalid argument");

  // Several requests' inputs in one region: named once.
  Batch same;
  for (size_t i = 0; i < 2; ++i) same.push_back(DeviceRequest(fake_gpu, 6 * i, 1, "shared"));
  EXPECT_EQ(server::InputCopyError(Spec(), same, 0, 24, copied).message(),
            "input 'INPUT__0' (24 bytes) to the device from shared-memory region 'shared': "
            "copying inputs out of CUDA shared-memory regions: invalid argument");

  // Bytes from the host (staging or the arena): no region to name.
  Batch host;
  host.push_back(DeviceRequest(fake_gpu, 0, 1));
  host[0]->inputs[0].shared_memory = false;
  host[0]->inputs[0].device_id = -1;
  EXPECT_EQ(server::InputCopyError(Spec(), host, 0, 12, absl::UnavailableError("cudaMemcpyAsync(H2D): busy")).message(),
            "input 'INPUT__0' (12 bytes) to the device: cudaMemcpyAsync(H2D): busy");

  // Outputs: the regions the copy was writing, not one whose request already failed (too small).
  std::vector<std::vector<char>> regions = {std::vector<char>(64, 'x'), std::vector<char>(4, 'x'),
                                            std::vector<char>(64, 'x')};
  Batch outs;
  for (size_t i = 0; i < 3; ++i) {
    outs.push_back(DeviceRequest(fake_gpu, 6 * i, 1));
    OutputToRegion(*outs[i], regions[i].data(), regions[i].size(), std::string("o") + std::to_string(i));
  }
  path.fail_ = absl::InternalError("copying outputs into CUDA shared-memory regions: launch failed");
  const torch::Tensor output = torch::arange(6, torch::kFloat32).view({3, 2}) + 0.5f;
  const absl::Status out_status = server::CopyOutputsToDevice(Spec(), outs, 0, output, path);
  EXPECT_EQ(out_status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(out_status.message(),
            "output 'OUTPUT__0' into CUDA shared-memory region 'o0', CUDA shared-memory region 'o2': "
            "copying outputs into CUDA shared-memory regions: launch failed");
  EXPECT_EQ(outs[1]->status.code(), absl::StatusCode::kInvalidArgument) << "o1 was too small: failed alone";
  for (const auto& region : regions) EXPECT_EQ(region, std::vector<char>(region.size(), 'x')) << "nothing written";
}

// Requests whose inputs are on the host and apart are gathered into the path's staging buffer; one
// that cannot be had fails the batch naming the input, its bytes and the requests.
TEST(DeviceTensorsTest, AStagingBufferThatCannotBeHadNamesTheInputAndItsBytes) {
  std::vector<std::vector<float>> rows = {{0.5f, -1.0f, 2.0f}, {3.0f, -4.5f, 6.25f}};
  Batch batch;
  for (auto& values : rows) {
    auto r = std::make_unique<InferRequest>();
    r->batch_items = 1;
    server::InputTensor in;
    in.index = 0;
    in.dtype = DataType::kFp32;
    in.shape = {1, 3};
    in.data = reinterpret_cast<const char*>(values.data());
    in.byte_size = 3 * sizeof(float);
    r->inputs.push_back(std::move(in));
    batch.push_back(std::move(r));
  }
  RecordingDevicePath path;
  auto staged = server::GatherInputs(Spec(), batch, path);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_EQ(path.staged_, 1) << "two requests apart: gathered";
  ASSERT_EQ((*staged)[0].bytes, 24u);
  EXPECT_EQ(std::memcmp((*staged)[0].data, rows[0].data(), 12), 0);
  EXPECT_EQ(std::memcmp((*staged)[0].data + 12, rows[1].data(), 12), 0);

  path.staging_fail_ = absl::ResourceExhaustedError("cudaHostAlloc failed: cudaErrorMemoryAllocation (out of memory)");
  staged = server::GatherInputs(Spec(), batch, path);
  ASSERT_FALSE(staged.ok());
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(staged.status().message(),
            "input 'INPUT__0': cannot stage the batch's 24 bytes (2 requests) for the copy: cudaHostAlloc failed: "
            "cudaErrorMemoryAllocation (out of memory)");
}

TEST(DeviceTensorsTest, TheCpuPathRefusesGpuMemoryNamingModelTensorAndWhy) {
  std::vector<float> fake_gpu(64, 0.0f);
  Batch batch;
  batch.push_back(DeviceRequest(fake_gpu, 0, 2));
  auto cpu = server::MakeCpuPath(SteadyClock::Get());
  cpu->SelectSlot(0);
  auto staged = server::GatherInputs(Spec(), batch, *cpu);
  ASSERT_EQ(staged.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(staged.status().message()),
              HasSubstr("input 'INPUT__0' is in CUDA shared memory, but this model instance runs on the CPU"));

  std::vector<char> region(64, 'x');
  OutputToRegion(*batch[0], region.data(), region.size());
  const torch::Tensor output = torch::ones({2, 2}, torch::kFloat32);
  ASSERT_TRUE(server::CopyOutputsToDevice(Spec(), batch, 0, output, *cpu).ok());
  EXPECT_EQ(batch[0]->status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(batch[0]->status.message()), HasSubstr("runs on the CPU"));
  EXPECT_EQ(region, std::vector<char>(64, 'x')) << "the host never wrote it";
}

TEST(DeviceTensorsTest, ABatchMixingAnInputOnTheDeviceAndOnTheHostIsAnInternalError) {
  std::vector<float> fake_gpu(64, 0.0f);
  Batch batch;
  batch.push_back(DeviceRequest(fake_gpu, 0, 1));
  batch.push_back(DeviceRequest(fake_gpu, 3, 1));
  batch[1]->inputs[0].device_id = -1;  // what the shape key prevents
  RecordingDevicePath path;
  auto staged = server::GatherInputs(Spec(), batch, path);
  ASSERT_EQ(staged.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(staged.status().message()), HasSubstr("1 of a batch's 2 requests"));
}

}  // namespace
}  // namespace chronoserve
