// LoadStream: one ModelStreamInfer stream of a LoadWorker (--streaming), on the worker's own
// completion queue. Requests are written in order, one write outstanding at a time (gRPC's rule),
// the others waiting in a queue; one read is always outstanding. Each request's id is its sequence
// number, which matches a response (any order) to its request. When the stream ends (server status,
// broken connection, cancellation) every request still unanswered is reported failed with the
// stream's status (DATA_LOSS when the stream was ended because an answer matched no request: one
// that does not parse or names an id not in flight). Used only on the worker thread.
//
//   LoadStream stream(&channel_stubs, &cq, base_request);
//   stream.Send(seq, nullptr, "");                     // the base request with id = seq
//   on a cq event whose tag is a LoadStream::Tag*: tag->stream->OnEvent(tag->op, ok, on_answer);
//   stream.Cancel(); ... keep handing events until stream.done()
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_LOAD_STREAM_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_LOAD_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>

#include "client/chronobench/channel_stubs.h"
#include "client/infer_wire.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client::bench {

class LoadStream {
 public:
  enum class Op { kStart, kRead, kWrite, kFinish };
  // The completion-queue tag of one of this stream's operations.
  struct Tag {
    LoadStream* stream;
    Op op;
  };
  // One request answered: `response` is null when it failed with the stream (then `grpc_code` is the
  // stream's status code); otherwise valid only during the callback. `grpc_code` is the response's
  // error_code parameter (UNKNOWN when absent) for an error response, 0 for a result.
  struct Answer {
    uint64_t seq = 0;
    int grpc_code = 0;
    const view::ModelInferResponseView* response = nullptr;
  };
  using OnAnswer = std::function<void(const Answer&)>;

  // Starts the call. `base` (copied) is what Send writes when given no message of its own.
  LoadStream(ChannelStubs* stubs, grpc::CompletionQueue* cq, const inference::ModelInferRequest& base);
  LoadStream(const LoadStream&) = delete;
  LoadStream& operator=(const LoadStream&) = delete;

  // Queues request `seq`: `message` (owned by the caller, unchanged until answered; null: the base
  // request) with id = seq and, when not empty, the request parameter traceparent. False once the
  // stream no longer accepts requests (the caller opens another); the request is then not queued.
  bool Send(uint64_t seq, inference::ModelInferRequest* message, const std::string& traceparent);
  // Handles one event of this stream; `on_answer` for each request answered or failed by it.
  void OnEvent(Op op, bool ok, const OnAnswer& on_answer);
  void Cancel() { context_.TryCancel(); }
  // Send() would queue a request. False from the first failed start, write or read on, which is
  // before ended(): the requests it already holds are failed when its Finish arrives.
  bool accepting() const { return !broken_ && !finishing_; }
  // The stream ended: no new requests; unanswered ones were failed.
  bool ended() const { return finished_; }
  // Ended and no operation outstanding: it may be destroyed.
  bool done() const { return finished_ && ops_ == 0; }
  size_t unanswered() const { return unanswered_.size(); }

 private:
  struct Queued {
    uint64_t seq;
    inference::ModelInferRequest* message;
    std::string traceparent;
  };
  void WriteNext();
  void StartFinish();

  grpc::ClientContext context_;
  inference::ModelInferRequest base_;  // without its tensors' bytes: those are base_raw_
  SharedRawInputs base_raw_;           // shared by every write of the base request
  std::unique_ptr<grpc::ClientAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream_;
  grpc::ByteBuffer response_;            // the answer a read is under way into
  std::string error_;                    // its error_message
  view::ModelInferResponseView answer_;  // its infer_response, reused: each read overwrites its entries
  wire::ReceivedMessage answer_raw_;     // its outputs, as views
  grpc::Status status_;
  Tag start_tag_{this, Op::kStart}, read_tag_{this, Op::kRead}, write_tag_{this, Op::kWrite},
      finish_tag_{this, Op::kFinish};
  std::deque<Queued> to_write_;
  std::unordered_set<uint64_t> unanswered_;  // written or queued, no answer yet
  int ops_ = 0;                              // tags handed to gRPC and not yet returned
  bool started_ = false;
  bool writing_ = false;
  bool broken_ = false;     // a write or the start failed, or unmatched_: nothing more is written
  bool unmatched_ = false;  // an answer matched no request: the stream was cancelled
  bool finishing_ = false;  // Finish was called
  bool finished_ = false;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_LOAD_STREAM_H_
