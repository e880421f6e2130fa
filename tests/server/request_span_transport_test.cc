// The server span of a request over real gRPC names the RPC that carried it ("ModelInfer <model>"
// or, for a message of a stream, "ModelStreamInfer <model>", and rpc.method alike), and a request
// refused while it was validated still gets its server span, in the caller's trace, with its status
// code. The real InferenceService on 127.0.0.1 with the RequestTracer as its observer (sampler
// always_on) exporting into memory; a Gated fake model (tests/server/gated_instance.h). Every wait
// and RPC has a deadline that fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/infer_stream.h"
#include "client/inference_client.h"
#include "common/otlp/batch_span_processor.h"
#include "tests/fakes/capturing_exporter.h"
#include "tests/fakes/loopback_grpc_server.h"
#include "server/grpc/inference_service.h"
#include "server/telemetry/request_tracer.h"
#include "tests/server/gated_instance.h"
#include "tests/server/scheduling_harness.h"

namespace chronoserve {
namespace {

using otlp::SpanData;
using server::telemetry::RequestTracer;

constexpr absl::Duration kWait = absl::Seconds(30);
constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr char kCallerSpan[] = "00f067aa0ba902b7";

using testing::CapturingExporter;

// The tracer, and a count of the requests it was told about that a test can wait for.
class CountingTracer final : public server::RequestObserver {
 public:
  explicit CountingTracer(RequestTracer* tracer) : tracer_(tracer) {}
  std::optional<server::TraceDecision> DecideTrace(const server::ModelSpec& spec,
                                                   const std::string& traceparent) override {
    return tracer_->DecideTrace(spec, traceparent);
  }
  void OnRequestDone(const server::ModelSpec& spec, const server::InferRequest* request, const RequestTiming& timing,
                     const absl::Status& status) override {
    tracer_->OnRequestDone(spec, request, timing, status);
    absl::MutexLock lock(&mu_);
    ++done_;
  }
  bool WaitForDone(int n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  RequestTracer* const tracer_;
  absl::Mutex mu_;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
};

std::string Hex(const uint8_t* bytes, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

const otlp::AttributeValue* Find(const SpanData& span, const std::string& key) {
  for (const auto& a : span.attributes) {
    if (key == a.key) return &a.value;
  }
  return nullptr;
}

// The server span of the request whose chronoserve.request.id is `id`; null if none.
const SpanData* ServerSpanOf(const std::vector<SpanData>& spans, const std::string& id) {
  for (const SpanData& s : spans) {
    const otlp::AttributeValue* v = Find(s, "chronoserve.request.id");
    if (s.kind == otlp::SpanKind::kServer && v != nullptr && std::get<std::string>(*v) == id) return &s;
  }
  return nullptr;
}

class RequestSpanTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto exporter = std::make_unique<CapturingExporter>();
    exporter_ = exporter.get();
    otlp::BatchSpanProcessorOptions options;
    options.schedule_delay = absl::Hours(1);  // exported when the test shuts the processor down
    processor_ = std::make_unique<otlp::BatchSpanProcessor>(std::move(exporter), options);
    processor_->Start();
    auto sampler = server::telemetry::Sampler::Create("always_on", "");
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    control_ = std::make_unique<server::telemetry::TraceControl>(*sampler, /*collector=*/true);
    tracer_ = std::make_unique<RequestTracer>(control_.get(), processor_.get());
    observer_ = std::make_unique<CountingTracer>(tracer_.get());
    service_ = std::make_unique<server::InferenceService>(&registry_, SteadyClock::Get(),
                                                          server::ServerInfo{"chronoserve-test", "0"}, observer_.get());
    server_ = testing::StartLoopbackServer(service_.get(), &port_);
    ASSERT_NE(server_, nullptr);
    client_ = client::InferenceClient::Connect("127.0.0.1:" + std::to_string(port_));
    runtime_ = testing::StartGatedModel(testing::GatedSpec("traced", 4, 0), 1, &gate_);
    ASSERT_NE(runtime_, nullptr);
    registry_.Add(runtime_);
  }
  void TearDown() override {
    gate_.Release();
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    registry_.StopAll();
    if (server_ != nullptr) server_->Wait();
    if (processor_ != nullptr) processor_->Shutdown(absl::Now() + absl::Seconds(10));
  }

  // Every span the tracer made, once `requests` requests were done (exported by shutting down).
  std::vector<SpanData> SpansAfter(int requests) {
    EXPECT_TRUE(observer_->WaitForDone(requests, kWait)) << "the server finished " << requests << " requests";
    processor_->Shutdown(absl::Now() + absl::Seconds(10));
    return exporter_->spans();
  }

  static inference::ModelInferRequest Request(const std::string& id, int64_t items, bool traced) {
    client::InferOptions options;
    options.id = id;
    inference::ModelInferRequest r =
        client::InferenceClient::BuildRequest("traced", {testing::GatedInput(items, 11)}, options);
    if (traced) {
      (*r.mutable_parameters())["traceparent"].set_string_param(
          absl::StrCat("00-", kTraceId, "-", kCallerSpan, "-01"));
    }
    return r;
  }

  testing::Gate gate_;
  server::ModelRegistry registry_;
  CapturingExporter* exporter_ = nullptr;
  std::unique_ptr<otlp::BatchSpanProcessor> processor_;
  std::unique_ptr<server::telemetry::TraceControl> control_;
  std::unique_ptr<RequestTracer> tracer_;
  std::unique_ptr<CountingTracer> observer_;
  std::unique_ptr<server::InferenceService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<client::InferenceClient> client_;
  std::shared_ptr<server::ModelRuntime> runtime_;
  int port_ = 0;
};

TEST_F(RequestSpanTransportTest, TheServerSpanNamesTheRpcThatCarriedTheRequest) {
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    inference::ModelInferResponse response;
    const grpc::Status unary = client_->stub()->ModelInfer(&ctx, Request("unary", 4, false), &response);
    ASSERT_TRUE(unary.ok()) << unary.error_message();
  }
  auto stream = client::InferStream::Open(client_->stub());
  ASSERT_TRUE(stream->Send(Request("streamed", 4, false)));
  auto answer = stream->Next(kWait);
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(client::InferStream::Decode(answer->message).ok());
  stream->CloseSend();
  ASSERT_TRUE(stream->Finish(kWait).has_value());

  const std::vector<SpanData> spans = SpansAfter(2);
  const SpanData* unary = ServerSpanOf(spans, "unary");
  const SpanData* streamed = ServerSpanOf(spans, "streamed");
  ASSERT_NE(unary, nullptr);
  ASSERT_NE(streamed, nullptr);
  EXPECT_EQ(unary->name, "ModelInfer traced");
  EXPECT_EQ(std::get<std::string>(*Find(*unary, "rpc.method")), "ModelInfer");
  EXPECT_EQ(streamed->name, "ModelStreamInfer traced");
  EXPECT_EQ(std::get<std::string>(*Find(*streamed, "rpc.method")), "ModelStreamInfer");
}

TEST_F(RequestSpanTransportTest, ARequestRefusedWhileValidatedHasItsServerSpanInTheCallersTrace) {
  // Unary: 5 items for a model whose max_batch_size is 4.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kWait));
    ctx.AddMetadata("traceparent", absl::StrCat("00-", kTraceId, "-", kCallerSpan, "-01"));
    inference::ModelInferResponse response;
    const grpc::Status refused = client_->stub()->ModelInfer(&ctx, Request("too-big", 5, false), &response);
    ASSERT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
  }
  // Streamed, its trace context in its own parameters.
  auto stream = client::InferStream::Open(client_->stub());
  ASSERT_TRUE(stream->Send(Request("too-big-streamed", 5, true)));
  auto answer = stream->Next(kWait);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(client::InferStream::Decode(answer->message).status().code(), absl::StatusCode::kInvalidArgument);
  stream->CloseSend();
  ASSERT_TRUE(stream->Finish(kWait).has_value());

  const std::vector<SpanData> spans = SpansAfter(2);
  for (const auto& [id, name] : std::map<std::string, std::string>{{"too-big", "ModelInfer traced"},
                                                                   {"too-big-streamed", "ModelStreamInfer traced"}}) {
    SCOPED_TRACE(id);
    const SpanData* span = ServerSpanOf(spans, id);
    ASSERT_NE(span, nullptr) << "a request refused while validated has no server span";
    EXPECT_EQ(span->name, name);
    EXPECT_EQ(Hex(span->trace_id.data(), span->trace_id.size()), kTraceId);
    EXPECT_EQ(Hex(span->parent_span_id.data(), span->parent_span_id.size()), kCallerSpan);
    EXPECT_EQ(std::get<int64_t>(*Find(*span, "rpc.grpc.status_code")),
              static_cast<int64_t>(absl::StatusCode::kInvalidArgument));
    EXPECT_LE(span->start_unix_ns, span->end_unix_ns);
    int children = 0;
    for (const SpanData& s : spans) children += s.parent_span_id == span->span_id;
    EXPECT_EQ(children, 0) << "a refused request reached no stage";
  }
}

}  // namespace
}  // namespace chronoserve
