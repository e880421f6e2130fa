// chronobench's streamed load against a server whose answers match no request in flight (an id it
// did not send, or an error answer with no infer_response and so no id): such a request would wait
// for ever, lowering the closed loop's concurrency for good. The stream is ended instead and every
// request it held counts as failed with DATA_LOSS, so the load keeps going and nothing is lost
// (sent == completed + drained). The server is a fake on 127.0.0.1 speaking real gRPC.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/chronobench/benchmark.h"
#include "client/chronobench/load_worker.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "proto/inference.grpc.pb.h"
#include "tests/fakes/loopback_grpc_server.h"

namespace chronoserve::client::bench {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

enum class WrongAnswer { kIdNotSent, kErrorWithoutResponse };
void PrintTo(WrongAnswer how, std::ostream* os) {
  *os << (how == WrongAnswer::kIdNotSent ? "an id not sent" : "an error without infer_response");
}

// Answers every streamed request at once, never with its own id.
class WrongIdStreams final : public inference::GRPCInferenceService::Service {
 public:
  explicit WrongIdStreams(WrongAnswer how) : how_(how) {}
  grpc::Status ModelStreamInfer(
      grpc::ServerContext* /*context*/,
      grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>* stream) override {
    inference::ModelInferRequest request;
    while (stream->Read(&request)) {
      inference::ModelStreamInferResponse answer;
      if (how_ == WrongAnswer::kIdNotSent) {
        answer.mutable_infer_response()->set_id(absl::StrCat(request.id(), "000000"));
        answer.mutable_infer_response()->set_model_name(request.model_name());
      } else {
        answer.set_error_message("model is not ready");
      }
      if (!stream->Write(answer)) break;
    }
    return grpc::Status::OK;
  }

 private:
  const WrongAnswer how_;
};

inference::ModelInferRequest MlpRequest() {
  inference::ModelInferRequest request;
  request.set_model_name("mlp");
  auto* input = request.add_inputs();
  input->set_name("INPUT__0");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  const float values[4] = {0.25f, -1.5f, 3.0f, 7.75f};
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  return request;
}

class LoadStreamUnmatchedTest : public ::testing::TestWithParam<WrongAnswer> {};

TEST_P(LoadStreamUnmatchedTest, AnswersMatchingNoRequestFailTheirStreamNotHangIt) {
  WrongIdStreams service(GetParam());
  int port = 0;
  std::unique_ptr<grpc::Server> server = testing::StartLoopbackServer(&service, &port);
  ASSERT_NE(server, nullptr);
  const std::string url = absl::StrCat("127.0.0.1:", port);

  const inference::ModelInferRequest request = MlpRequest();
  std::vector<ChannelStubs> stubs;
  for (const auto& channel : MakeDistinctChannels(url, 1)) stubs.emplace_back(channel);
  WorkerShared shared{&stubs, &request, SteadyClock::Get(), nullptr, 1, nullptr};
  WorkerPlan plan;
  plan.mode = LoadMode::kConcurrency;
  plan.in_flight = 4;
  plan.streaming = true;
  {
    LoadWorker worker(0, plan, shared);
    ASSERT_TRUE(worker.Prepare().ok());
    worker.Start(SteadyClock::Get()->NowNs());
    // Before: the first four requests waited for ever and the closed loop sent nothing more.
    EXPECT_TRUE(worker.AwaitCompleted(200, kWait)) << "only " << worker.completed() << " requests ended";
    worker.Stop();
    EXPECT_EQ(worker.sent(), worker.completed() + worker.drained())
        << worker.sent() - worker.completed() - worker.drained() << " requests neither answered nor counted";
    const LatencyRecorder recorded = worker.TakeRecorder();
    EXPECT_EQ(recorded.successes(), 0);
    EXPECT_EQ(recorded.errors(), worker.completed());
    const auto& codes = recorded.errors_by_code();
    ASSERT_EQ(codes.size(), 1u) << "one code for all: " << codes.begin()->first;
    EXPECT_EQ(codes.begin()->first, static_cast<int>(grpc::StatusCode::DATA_LOSS));
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
}

INSTANTIATE_TEST_SUITE_P(IdNotSentAndErrorWithoutResponse, LoadStreamUnmatchedTest,
                         ::testing::Values(WrongAnswer::kIdNotSent, WrongAnswer::kErrorWithoutResponse),
                         [](const ::testing::TestParamInfo<WrongAnswer>& info) {
                           return info.param == WrongAnswer::kIdNotSent ? std::string("IdNotSent")
                                                                        : std::string("ErrorWithoutResponse");
                         });

}  // namespace
}  // namespace chronoserve::client::bench
