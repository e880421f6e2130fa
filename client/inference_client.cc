#include "client/inference_client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/infer_wire.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "common/tensor_data.h"
#include "common/typed_contents.h"

namespace chronoserve::client {
namespace {

// ModelInfer's full method name, as the generated stub calls it.
constexpr char kModelInferMethod[] = "/inference.GRPCInferenceService/ModelInfer";

// An output that came in the response's typed `contents` (KServe v2 allows them in place of
// raw_output_contents) as raw bytes of `dtype` (common/typed_contents.h); `what` names the output.
absl::StatusOr<std::string> TypedOutputBytes(const inference::ModelInferResponse::InferOutputTensor& o,
                                              DataType dtype, const std::string& what) {
  std::optional<TypedBytes> packed = PackTypedContents(o.contents(), dtype);
  if (!packed.has_value()) {
    return absl::DataLossError(absl::StrCat(what, ": ", DataTypeName(dtype),
                                            " has no typed contents field, and the response has no raw contents"));
  }
  if (const auto& bad = packed->out_of_range; bad.has_value()) {
    return absl::DataLossError(
        absl::StrCat(what, ": typed value ", bad->index, " (", bad->value, ") does not fit its datatype"));
  }
  return std::move(packed->bytes);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

grpc::ChannelArguments ClientChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1);
  return args;
}

std::unique_ptr<InferenceClient> InferenceClient::Connect(const std::string& address,
                                                          std::optional<std::chrono::milliseconds> default_timeout) {
  return std::make_unique<InferenceClient>(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), ClientChannelArguments()),
      default_timeout);
}

InferenceClient::InferenceClient(std::shared_ptr<grpc::Channel> channel,
                                 std::optional<std::chrono::milliseconds> default_timeout)
    : channel_(std::move(channel)),
      default_timeout_(default_timeout),
      stub_(inference::GRPCInferenceService::NewStub(channel_)),
      model_infer_(kModelInferMethod, grpc::internal::RpcMethod::NORMAL_RPC, channel_) {}

void InferenceClient::ApplyDefaultTimeout(grpc::ClientContext* ctx) const {
  if (default_timeout_.has_value()) ctx->set_deadline(std::chrono::system_clock::now() + *default_timeout_);
}

absl::StatusOr<bool> InferenceClient::ServerLive() {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::ServerLiveResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ServerLive(&ctx, {}, &response)));
  return response.live();
}

absl::StatusOr<bool> InferenceClient::ServerReady() {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::ServerReadyResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ServerReady(&ctx, {}, &response)));
  return response.ready();
}

absl::StatusOr<bool> InferenceClient::ModelReady(const std::string& model, const std::string& version) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::ModelReadyRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelReadyResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ModelReady(&ctx, request, &response)));
  return response.ready();
}

absl::StatusOr<inference::ServerMetadataResponse> InferenceClient::ServerMetadata() {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::ServerMetadataResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ServerMetadata(&ctx, {}, &response)));
  return response;
}

absl::StatusOr<inference::ModelMetadataResponse> InferenceClient::ModelMetadata(const std::string& model,
                                                                                const std::string& version) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::ModelMetadataRequest request;
  request.set_name(model);
  request.set_version(version);
  inference::ModelMetadataResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ModelMetadata(&ctx, request, &response)));
  return response;
}

absl::StatusOr<inference::ModelStatisticsResponse> InferenceClient::ModelStatistics(const std::string& model) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::ModelStatisticsRequest request;
  request.set_name(model);
  inference::ModelStatisticsResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ModelStatistics(&ctx, request, &response)));
  return response;
}

absl::Status InferenceClient::RegisterSystemSharedMemory(const std::string& name, const std::string& key,
                                                         size_t byte_size, size_t offset) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  inference::SystemSharedMemoryRegisterResponse response;
  return FromGrpcStatus(stub_->SystemSharedMemoryRegister(&ctx, request, &response));
}

absl::Status InferenceClient::UnregisterSystemSharedMemory(const std::string& name) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::SystemSharedMemoryUnregisterRequest request;
  request.set_name(name);
  inference::SystemSharedMemoryUnregisterResponse response;
  return FromGrpcStatus(stub_->SystemSharedMemoryUnregister(&ctx, request, &response));
}

absl::StatusOr<inference::SystemSharedMemoryStatusResponse> InferenceClient::SystemSharedMemoryStatus(
    const std::string& name) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::SystemSharedMemoryStatusRequest request;
  request.set_name(name);
  inference::SystemSharedMemoryStatusResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->SystemSharedMemoryStatus(&ctx, request, &response)));
  return response;
}

absl::Status InferenceClient::RegisterCudaSharedMemory(const std::string& name, const std::string& raw_handle,
                                                      int64_t device_id, size_t byte_size) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::CudaSharedMemoryRegisterRequest request;
  request.set_name(name);
  request.set_raw_handle(raw_handle);
  request.set_device_id(device_id);
  request.set_byte_size(byte_size);
  inference::CudaSharedMemoryRegisterResponse response;
  return FromGrpcStatus(stub_->CudaSharedMemoryRegister(&ctx, request, &response));
}

absl::Status InferenceClient::UnregisterCudaSharedMemory(const std::string& name) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::CudaSharedMemoryUnregisterRequest request;
  request.set_name(name);
  inference::CudaSharedMemoryUnregisterResponse response;
  return FromGrpcStatus(stub_->CudaSharedMemoryUnregister(&ctx, request, &response));
}

absl::StatusOr<inference::CudaSharedMemoryStatusResponse> InferenceClient::CudaSharedMemoryStatus(
    const std::string& name) {
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  inference::CudaSharedMemoryStatusRequest request;
  request.set_name(name);
  inference::CudaSharedMemoryStatusResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->CudaSharedMemoryStatus(&ctx, request, &response)));
  return response;
}

namespace {

constexpr char kShmRegion[] = "shared_memory_region";
constexpr char kShmOffset[] = "shared_memory_offset";
constexpr char kShmByteSize[] = "shared_memory_byte_size";

void SetSharedMemoryParams(const SharedMemoryRef& ref,
                           google::protobuf::Map<std::string, inference::InferParameter>* params) {
  (*params)[kShmRegion].set_string_param(ref.region);
  (*params)[kShmByteSize].set_int64_param(static_cast<int64_t>(ref.byte_size));
  if (ref.offset > 0) (*params)[kShmOffset].set_int64_param(static_cast<int64_t>(ref.offset));
}

std::optional<SharedMemoryRef> SharedMemoryOf(
    const google::protobuf::Map<std::string, inference::InferParameter>& params) {
  auto region = params.find(kShmRegion);
  if (region == params.end()) return std::nullopt;
  SharedMemoryRef ref;
  ref.region = region->second.string_param();
  if (auto it = params.find(kShmByteSize); it != params.end()) ref.byte_size = it->second.int64_param();
  if (auto it = params.find(kShmOffset); it != params.end()) ref.offset = it->second.int64_param();
  return ref;
}

// One timing.* parameter's value as DecodeTimingParams takes it.
TimingParam ToTimingParam(const inference::InferParameter& value) {
  TimingParam p;
  switch (value.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param: p.int_value = value.int64_param(); break;
    case inference::InferParameter::kBoolParam: p.kind = TimingParam::Kind::kBool; p.bool_value = value.bool_param(); break;
    case inference::InferParameter::kStringParam: p.kind = TimingParam::Kind::kString; p.string_value = value.string_param(); break;
    default: p.kind = TimingParam::Kind::kString; break;
  }
  return p;
}

// Reads only the whole elements `data` holds: a tensor whose data is shorter than its shape goes
// with fewer values, and the server's element-count check names the mismatch (as it names a short
// raw_input_contents), instead of this reading past the buffer.
void SetTypedContents(const Tensor& t, inference::InferTensorContents* c) {
  const size_t element_bytes = DataTypeByteSize(t.dtype);
  if (element_bytes == 0) return;  // an invalid datatype has no field; the server names it
  const int64_t n = std::min(ElementCount(t.shape), static_cast<int64_t>(t.data.size() / element_bytes));
  for (int64_t i = 0; i < n; ++i) {
    const double v = ElementAsDouble(t.dtype, t.data.data(), i);
    switch (t.dtype) {
      case DataType::kBool: c->add_bool_contents(v != 0); break;
      case DataType::kInt8: case DataType::kInt16: case DataType::kInt32: c->add_int_contents(static_cast<int32_t>(v)); break;
      case DataType::kInt64: { int64_t x; std::memcpy(&x, t.data.data() + i * 8, 8); c->add_int64_contents(x); break; }
      case DataType::kUint8: case DataType::kUint16: case DataType::kUint32: c->add_uint_contents(static_cast<uint32_t>(v)); break;
      case DataType::kUint64: { uint64_t x; std::memcpy(&x, t.data.data() + i * 8, 8); c->add_uint64_contents(x); break; }
      case DataType::kFp32: c->add_fp32_contents(static_cast<float>(v)); break;
      case DataType::kFp64: c->add_fp64_contents(v); break;
      default: break;  // FP16/BF16 have no typed field; the server will say so
    }
  }
}
}  // namespace

inference::ModelInferRequest InferenceClient::BuildRequest(const std::string& model,
                                                           const std::vector<Tensor>& inputs,
                                                           const InferOptions& options) {
  std::vector<const Tensor*> raw;
  inference::ModelInferRequest request = BuildRequestHead(model, inputs, options, &raw);
  for (const Tensor* t : raw) request.add_raw_input_contents(t->data);
  return request;
}

inference::ModelInferRequest InferenceClient::BuildRequestHead(const std::string& model,
                                                               const std::vector<Tensor>& inputs,
                                                               const InferOptions& options,
                                                               std::vector<const Tensor*>* raw) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_model_version(options.version);
  request.set_id(options.id);
  for (const Tensor& t : inputs) {
    auto* in = request.add_inputs();
    in->set_name(t.name);
    in->set_datatype(DataTypeName(t.dtype));
    for (int64_t d : t.shape) in->add_shape(d);
    if (t.shared_memory.has_value()) {
      // raw_input_contents holds only the inputs that travel in the message.
      SetSharedMemoryParams(*t.shared_memory, in->mutable_parameters());
    } else if (options.typed_contents) {
      SetTypedContents(t, in->mutable_contents());
    } else {
      raw->push_back(&t);
    }
  }
  auto add_output = [&](const std::string& name) {
    auto* out = request.add_outputs();
    out->set_name(name);
    auto it = options.output_shared_memory.find(name);
    if (it != options.output_shared_memory.end()) SetSharedMemoryParams(it->second, out->mutable_parameters());
  };
  for (const auto& name : options.outputs) add_output(name);
  for (const auto& [name, ref] : options.output_shared_memory) {
    if (std::find(options.outputs.begin(), options.outputs.end(), name) == options.outputs.end()) add_output(name);
  }
  return request;
}

absl::StatusOr<InferResult> InferenceClient::DecodeResponse(const inference::ModelInferResponse& response) {
  return DecodeResponse(response, nullptr);
}

void InferenceClient::MarkAskedSharedMemory(const std::map<std::string, SharedMemoryRef>& asked,
                                            inference::ModelInferResponse* response,
                                            const std::vector<size_t>* entry_sizes) {
  const size_t entries = entry_sizes != nullptr ? entry_sizes->size()
                                                : static_cast<size_t>(response->raw_output_contents_size());
  const bool one_per_output = entries == static_cast<size_t>(response->outputs_size());
  for (int k = 0; k < response->outputs_size(); ++k) {
    auto& o = *response->mutable_outputs(k);
    const auto it = asked.find(o.name());
    if (it == asked.end() || SharedMemoryOf(o.parameters()).has_value()) continue;
    // Its values came in the typed `contents`: a server that ignored the region and sent no raw ones.
    if (o.has_contents() && o.contents().ByteSizeLong() != 0) continue;
    const size_t entry = !one_per_output        ? 0
                         : entry_sizes != nullptr ? (*entry_sizes)[static_cast<size_t>(k)]
                                                  : response->raw_output_contents(k).size();
    if (entry != 0) continue;  // its bytes came in the message: a server that ignored the region
    SetSharedMemoryParams(it->second, o.mutable_parameters());
  }
}

absl::StatusOr<InferResult> InferenceClient::DecodeResponse(const inference::ModelInferResponse& response,
                                                            const std::vector<wire::ReceivedBytes>* raw_apart) {
  // The raw_output_contents: the message's own, or read apart from it (Infer).
  const int raw = raw_apart != nullptr ? static_cast<int>(raw_apart->size()) : response.raw_output_contents_size();
  auto raw_bytes = [&](int i) -> std::string {
    if (raw_apart == nullptr) return response.raw_output_contents(i);
    return (*raw_apart)[i].ToString();
  };
  InferResult result;
  result.id = response.id();
  // Triton and chronoserve send one raw entry per output (empty for one in shared memory); accept
  // also a server that leaves those out, as long as the count says which convention it used.
  int in_message = 0;
  for (const auto& o : response.outputs()) in_message += SharedMemoryOf(o.parameters()).has_value() ? 0 : 1;
  const bool one_per_output = raw == response.outputs_size();
  // No raw contents at all: the outputs in the message are in their typed `contents`.
  const bool typed = raw == 0 && in_message > 0;
  if (!one_per_output && !typed && raw != in_message) {
    return absl::DataLossError(absl::StrCat("response has ", response.outputs_size(), " outputs (",
                                            in_message, " not in shared memory) but ", raw, " raw contents"));
  }
  int next_raw = 0;
  for (int k = 0; k < response.outputs_size(); ++k) {
    const auto& o = response.outputs(k);
    Tensor t;
    t.name = o.name();
    absl::StatusOr<DataType> dtype = DataTypeFromName(o.datatype());
    if (!dtype.ok()) {
      // E.g. Triton's BYTES (strings), which no LibTorch model makes: say which output, not just what.
      return absl::UnimplementedError(absl::StrCat("output '", o.name(), "' of model '", response.model_name(),
                                                   "': this client does not decode ", dtype.status().message()));
    }
    t.dtype = *dtype;
    t.shape.assign(o.shape().begin(), o.shape().end());
    t.shared_memory = SharedMemoryOf(o.parameters());
    if (t.shared_memory.has_value()) {
      // In a region: its raw entry (one per output) must be empty, and its place in the region sane.
      if (one_per_output && (raw_apart != nullptr ? (*raw_apart)[k].size : response.raw_output_contents(k).size()) != 0) {
        return absl::DataLossError(absl::StrCat("output '", o.name(), "' of model '", response.model_name(),
                                                "': marked as in shared-memory region '", t.shared_memory->region,
                                                "' but its bytes came in the response too"));
      }
      for (const char* key : {kShmByteSize, kShmOffset}) {
        if (auto it = o.parameters().find(key); it != o.parameters().end() && it->second.int64_param() < 0) {
          return absl::DataLossError(absl::StrCat("output '", o.name(), "' of model '", response.model_name(),
                                                  "': ", key, " ", it->second.int64_param(),
                                                  " in the response is negative"));
        }
      }
    } else if (typed) {
      ASSIGN_OR_RETURN(t.data, TypedOutputBytes(o, t.dtype,
                                                absl::StrCat("output '", o.name(), "' of model '", response.model_name(), "'")));
    } else if (one_per_output) {
      t.data = raw_bytes(k);
    } else {
      t.data = raw_bytes(next_raw++);
    }
    if (!t.shared_memory.has_value()) {
      // An output in the message holds exactly what its shape and data type say: a short or empty
      // entry is not a tensor (an output a server put in shared memory without saying so, unless
      // Infer was told where it asked for it).
      const std::optional<int64_t> expected = ByteCount(ElementCount(t.shape), t.dtype);
      if (!expected.has_value() || static_cast<uint64_t>(*expected) != t.data.size()) {
        return absl::DataLossError(absl::StrCat(
            "output '", o.name(), "' of model '", response.model_name(), "': ", t.data.size(),
            " bytes in the response, but its shape ", ShapeString(t.shape), " of ", o.datatype(), " needs ",
            expected.has_value() ? absl::StrCat(*expected) : std::string("a valid size")));
      }
    }
    result.outputs.push_back(std::move(t));
  }
  result.timing = DecodeTiming(response);
  return result;
}

std::optional<RequestTiming> InferenceClient::DecodeTiming(const inference::ModelInferResponse& response) {
  // The lookup copies no key (DecodeTimingParams names the field in its errors), and only a string
  // parameter's value. chronobench reads its responses as views instead (client/response_view.h).
  const auto& params = response.parameters();
  auto timing = DecodeTimingParams([&params](const std::string& key) -> std::optional<TimingParam> {
    auto it = params.find(key);
    if (it == params.end()) return std::nullopt;
    return ToTimingParam(it->second);
  });
  if (!timing.ok()) return std::nullopt;
  return *timing;
}

absl::StatusOr<InferResult> InferenceClient::Infer(const std::string& model,
                                                   const std::vector<Tensor>& inputs,
                                                   const InferOptions& options) {
  std::vector<const Tensor*> raw;
  const inference::ModelInferRequest head = BuildRequestHead(model, inputs, options, &raw);
  grpc::ClientContext ctx;
  ApplyDefaultTimeout(&ctx);
  if (options.timeout.has_value()) ctx.set_deadline(std::chrono::system_clock::now() + *options.timeout);
  for (const auto& [key, value] : options.metadata) ctx.AddMetadata(key, value);
  // The messages as byte buffers (common/wire/bytes_field.h): the inputs are copied once, into
  // the request's slices, and the outputs once, out of the received slices into the result, where
  // protobuf's serialization copied each twice. The clock covers what the generated stub's call
  // covered: writing the request's bytes, the call, reading the response's fields.
  const int64_t start = SteadyClock::Now();
  wire::MessageWriter writer(head.SerializeAsString());
  for (const Tensor* t : raw) writer.AddCopy(inference::ModelInferRequest::kRawInputContentsFieldNumber, t->data);
  const grpc::ByteBuffer request = writer.Finish();
  grpc::ByteBuffer response_wire;
  grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel_.get(), model_infer_, &ctx, request, &response_wire);
  wire::ReceivedMessage received;
  inference::ModelInferResponse response;
  const absl::Status read = status.ok() ? ReadInferResponse(response_wire, &response, &received) : absl::OkStatus();
  const int64_t end = SteadyClock::Now();
  RETURN_IF_ERROR(FromGrpcStatus(status));
  RETURN_IF_ERROR(read);
  // Triton does not echo an output's shared_memory_* parameters (chronoserve does): an output asked
  // for in a region is there when its raw entry is empty (or the server sent entries only for
  // outputs in the message). One whose bytes came in the message is read from the message: a server
  // that ignored the request's shared-memory parameters.
  if (!options.output_shared_memory.empty()) {
    std::vector<size_t> sizes;
    for (const wire::ReceivedBytes& entry : received.entries) sizes.push_back(entry.size);
    MarkAskedSharedMemory(options.output_shared_memory, &response, &sizes);
  }
  ASSIGN_OR_RETURN(InferResult result, DecodeResponse(response, &received.entries));
  result.e2e_ns = end - start;
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find(std::string(kServerTimingKey));
  if (it != trailers.end()) result.server_timing.assign(it->second.data(), it->second.size());
  return result;
}

}  // namespace chronoserve::client
