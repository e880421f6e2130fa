#include "client/chronobench/load_stream.h"

#include <atomic>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/chronobench/latency_recorder.h"
#include "client/response_view.h"
#include "common/log.h"

namespace chronoserve::client::bench {
namespace {
constexpr int kUnknown = static_cast<int>(grpc::StatusCode::UNKNOWN);
constexpr int kDataLoss = static_cast<int>(grpc::StatusCode::DATA_LOSS);
}  // namespace

LoadStream::LoadStream(ChannelStubs* stubs, grpc::CompletionQueue* cq, const inference::ModelInferRequest& base)
    : base_(base), base_raw_(TakeRawInputs(&base_)) {
  stream_ = stubs->streaming.PrepareCall(&context_, ChannelStubs::kModelStreamInfer, cq);
  ++ops_;
  stream_->StartCall(&start_tag_);
}

bool LoadStream::Send(uint64_t seq, inference::ModelInferRequest* message, const std::string& traceparent) {
  if (!accepting()) return false;
  to_write_.push_back({seq, message != nullptr ? message : &base_, traceparent});
  unanswered_.insert(seq);
  if (started_) WriteNext();
  return true;
}

void LoadStream::WriteNext() {
  if (writing_ || broken_ || to_write_.empty()) return;
  Queued& next = to_write_.front();
  inference::ModelInferRequest* m = next.message;
  // The message is ours until this write completes (one write at a time; a slot's own request
  // belongs to its one call), so it may be stamped in place.
  m->set_id(std::to_string(next.seq));
  if (next.traceparent.empty()) {
    m->mutable_parameters()->erase("traceparent");
  } else {
    (*m->mutable_parameters())["traceparent"].set_string_param(next.traceparent);
  }
  writing_ = true;
  ++ops_;
  // More requests queued: let gRPC buffer this one; the next (unbuffered) write, issued when this
  // one completes, flushes both together.
  grpc::WriteOptions options;
  if (to_write_.size() > 1) options.set_buffer_hint();
  stream_->Write(WriteInferRequest(*m, m == &base_ ? base_raw_ : nullptr), options, &write_tag_);
}

void LoadStream::StartFinish() {
  if (finishing_) return;
  finishing_ = true;
  ++ops_;
  stream_->Finish(&status_, &finish_tag_);
}

void LoadStream::OnEvent(Op op, bool ok, const OnAnswer& on_answer) {
  --ops_;
  switch (op) {
    case Op::kStart:
      if (!ok) {
        broken_ = true;
        StartFinish();
        return;
      }
      started_ = true;
      ++ops_;
      stream_->Read(&response_, &read_tag_);
      WriteNext();
      return;
    case Op::kWrite:
      writing_ = false;
      if (!to_write_.empty()) to_write_.pop_front();
      if (!ok) broken_ = true;  // the read fails too and ends the stream
      WriteNext();
      return;
    case Op::kRead: {
      if (!ok) {
        StartFinish();
        return;
      }
      uint64_t seq = 0;
      const view::ModelInferResponseView& r = answer_;
      const bool read = ReadStreamInferResponse(response_, &error_, &answer_, &answer_raw_).ok();
      response_.Clear();
      answer_raw_.slices.reset();  // the outputs are not read: let gRPC's buffers go
      if (read && absl::SimpleAtoi(r.id(), &seq) && unanswered_.erase(seq) > 0) {
        Answer answer{seq, 0, &r};
        if (!error_.empty()) {
          const std::optional<int64_t> code = FindInt64Parameter(r.parameters(), "error_code");
          answer.grpc_code = code.has_value() && *code != 0 ? ValidGrpcCode(*code) : kUnknown;
        }
        on_answer(answer);
      } else if (!unmatched_) {
        // An answer that does not parse, or whose id names no request of this stream: the request it
        // answers cannot be known, and would wait for ever. End the stream, failing what it holds
        // with DATA_LOSS (as a unary answer that does not parse), and say why once.
        unmatched_ = true;
        broken_ = true;
        static std::atomic<bool> logged{false};  // a server that does this does it to every stream
        if (!logged.exchange(true)) {
          CS_LOG(ERROR) << "a streamed answer "
                        << (read ? absl::StrCat("with id '", r.id(), "'") : std::string("that does not parse"))
                        << " matches no request in flight on its stream; ending the stream, its " << unanswered_.size()
                        << " requests fail with DATA_LOSS (logged once; later streams end the same way)";
        }
        context_.TryCancel();
      }
      ++ops_;
      stream_->Read(&response_, &read_tag_);
      return;
    }
    case Op::kFinish: {
      finished_ = true;
      // The server ended the stream (or it broke): what it did not answer failed with its status.
      const int code = unmatched_ ? kDataLoss : status_.ok() ? kUnknown : static_cast<int>(status_.error_code());
      for (uint64_t seq : unanswered_) on_answer(Answer{seq, code, nullptr});
      unanswered_.clear();
      to_write_.clear();
      return;
    }
  }
}

}  // namespace chronoserve::client::bench
