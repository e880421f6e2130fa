#include "server/grpc/serving_warmup.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>

#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/host_port.h"
#include "common/dtype.h"
#include "proto/inference.grpc.pb.h"
#include "server/core/synthetic_request.h"

namespace chronoserve::server {
namespace {

std::shared_ptr<grpc::Channel> WarmupChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // As our clients do (client/inference_client.cc): large tensors in few round trips.
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, (16 << 20) - 1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection, closed with the channel
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

void Tag(grpc::ClientContext* ctx, const std::string& token, absl::Duration timeout) {
  ctx->AddMetadata(kServingWarmupMetadataKey, token);
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
}

// Messages one warm-up stream may have sent and not yet seen answered: well under the server's
// StreamOptions::max_in_flight (1024), at which it stops reading the stream.
constexpr int kStreamWindow = 256;

// The input bytes of a warm-up request of `items` (what the model's queue holds for it).
uint64_t MessageBytes(const inference::ModelInferRequest& message) {
  uint64_t bytes = 0;
  for (const std::string& raw : message.raw_input_contents()) bytes += raw.size();
  return bytes;
}

// How many messages the warm-up stream may have unanswered within the model's own queue limits, so
// that a correct config never fails its warm-up: one when a queue timeout could expire behind the
// others, else at most max_queue_size and as many of the largest as max_queue_bytes holds.
int StreamWindow(const QueuePolicySpec& q, uint64_t largest_bytes) {
  if (q.default_timeout_microseconds > 0) return 1;
  int64_t window = kStreamWindow;
  if (q.max_queue_size > 0) window = std::min<int64_t>(window, q.max_queue_size);
  if (q.max_queue_bytes > 0 && largest_bytes > 0) {
    window = std::min<int64_t>(window, std::max<uint64_t>(1, q.max_queue_bytes / largest_bytes));
  }
  return static_cast<int>(window);
}

class Warmer {
 public:
  Warmer(inference::GRPCInferenceService::Stub* stub, const std::string& token, absl::Duration timeout,
         ServingWarmupReport* report)
      : stub_(stub), token_(token), timeout_(timeout), report_(report) {}

  void Unary(const ModelSpec& spec, int64_t items, uint64_t seed) {
    grpc::ClientContext ctx;
    Tag(&ctx, token_, timeout_);
    inference::ModelInferResponse response;
    const grpc::Status status = stub_->ModelInfer(&ctx, SyntheticInferMessage(spec, items, seed), &response);
    ++report_->sent;
    if (!status.ok()) Fail(spec, absl::StrCat("ModelInfer at batch size ", items, ": ", status.error_message()));
  }

  void Stream(const ModelSpec& spec, const std::vector<int64_t>& sizes, int messages, uint64_t seed, int window) {
    grpc::ClientContext ctx;
    Tag(&ctx, token_, timeout_);
    auto stream = stub_->ModelStreamInfer(&ctx);
    int written = 0;
    int answered = 0;
    bool reads_over = false;
    inference::ModelStreamInferResponse response;
    auto read_one = [&] {
      if (!stream->Read(&response)) return false;
      ++answered;
      if (!response.error_message().empty()) Fail(spec, absl::StrCat("ModelStreamInfer: ", response.error_message()));
      return true;
    };
    // Never more than kStreamWindow unanswered: the server stops reading a stream at
    // StreamOptions::max_in_flight (1024) unanswered, and responses the client does not read fill
    // its receive window; writing everything before reading would block both ends until the deadline.
    for (int i = 0; i < messages; ++i) {
      if (written - answered >= window && !read_one()) {
        reads_over = true;  // the stream ended: what is left is never answered
        break;
      }
      if (!stream->Write(SyntheticInferMessage(spec, sizes[i % sizes.size()], seed + i))) break;
      ++written;
    }
    stream->WritesDone();
    report_->sent += messages;
    while (!reads_over && read_one()) {
    }
    const grpc::Status status = stream->Finish();
    for (int i = answered; i < messages; ++i) {
      Fail(spec, absl::StrCat("ModelStreamInfer: ", written < messages ? "could not send every message"
                                                                      : "a message was never answered",
                              status.ok() ? "" : absl::StrCat(" (", status.error_message(), ")")));
    }
  }

  void Fail(const ModelSpec& spec, const std::string& what) {
    if (report_->failed++ == 0) report_->first_error = absl::StrCat("model '", spec.name, "' ", what);
  }

 private:

  inference::GRPCInferenceService::Stub* const stub_;
  const std::string& token_;
  const absl::Duration timeout_;
  ServingWarmupReport* const report_;
};

}  // namespace

std::string NewServingWarmupToken() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&token, absl::Hex(device(), absl::kZeroPad8));
  return token;
}

std::string LoopbackTarget(const std::string& host, int port) {
  if (host.empty() || host == "0.0.0.0") return absl::StrCat("127.0.0.1:", port);
  if (host == "::" || host == "[::]") return absl::StrCat("[::1]:", port);
  if (host.front() == '[') return absl::StrCat(host, ":", port);  // bracketed already
  return HostPort(host, port);
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr v4;
  return ::inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

inference::ModelInferRequest SyntheticInferMessage(const ModelSpec& spec, int64_t items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> unused_outputs;
  std::unique_ptr<InferRequest> synthetic =
      MakeSyntheticRequest(spec, items, &unused_outputs, rng, spec.SyntheticDims());
  inference::ModelInferRequest message;
  message.set_model_name(spec.name);
  message.set_model_version(std::to_string(spec.version));
  for (const InputTensor& in : synthetic->inputs) {
    auto* tensor = message.add_inputs();
    tensor->set_name(spec.inputs[in.index].name);
    tensor->set_datatype(DataTypeName(in.dtype));
    for (int64_t d : in.shape) tensor->add_shape(d);
    message.add_raw_input_contents(*in.owned_data);
  }
  return message;
}

ServingWarmupReport RunServingWarmup(const std::string& target, const std::vector<ModelSpec>& models,
                                     const std::string& token, int requests, absl::Duration call_timeout,
                                     const std::atomic<bool>* stop) {
  auto stopped = [stop] { return stop != nullptr && stop->load(); };
  ServingWarmupReport report;
  const int64_t start_ns = SteadyClock::Now();
  auto stub = inference::GRPCInferenceService::NewStub(WarmupChannel(target));
  Warmer warmer(stub.get(), token, call_timeout, &report);
  uint64_t seed = 0x5e7e;
  for (const ModelSpec& spec : models) {
    const QueuePolicySpec& queue = spec.dynamic_batching.queue_policy;
    // A warm-up that cannot build its messages (the host out of memory) only loses its benefit.
    try {
      // Only sizes the model's queue can ever hold (--max-queue-mib): a larger one is refused.
      std::vector<int64_t> sizes;
      uint64_t largest_bytes = 0;
      for (int64_t items : {int64_t{1}, static_cast<int64_t>(spec.max_batch_size)}) {
        if (items < 1 || (!sizes.empty() && items <= sizes.back())) continue;
        const uint64_t bytes = MessageBytes(SyntheticInferMessage(spec, items, seed));
        if (queue.max_queue_bytes > 0 && bytes > queue.max_queue_bytes) continue;
        sizes.push_back(items);
        largest_bytes = std::max(largest_bytes, bytes);
      }
      if (sizes.empty()) continue;
      for (int64_t items : sizes) {
        for (int i = 0; i < requests && !stopped(); ++i) warmer.Unary(spec, items, ++seed);
      }
      if (requests > 0 && !stopped()) {
        warmer.Stream(spec, sizes, requests, seed += requests, StreamWindow(queue, largest_bytes));
      }
    } catch (const std::exception& e) {
      warmer.Fail(spec, absl::StrCat("could not build its requests: ", e.what()));
    }
  }
  report.elapsed_ns = SteadyClock::Now() - start_ns;
  return report;
}

}  // namespace chronoserve::server
