#include "client/infer_stream.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/status_macros.h"

namespace chronoserve::client {
namespace {
constexpr absl::Duration kDestroyTimeout = absl::Seconds(60);
}  // namespace

std::unique_ptr<InferStream> InferStream::Open(inference::GRPCInferenceService::Stub* stub,
                                               const std::map<std::string, std::string>& metadata) {
  std::unique_ptr<InferStream> stream(new InferStream());
  for (const auto& [key, value] : metadata) stream->context_.AddMetadata(key, value);
  stub->async()->ModelStreamInfer(&stream->context_, stream.get());
  // Held until the reads are over and no write or WritesDone is in flight, so that Send() and
  // CloseSend() may start them from any thread meanwhile.
  stream->AddHold();
  stream->StartRead(&stream->reading_);
  stream->StartCall();
  return stream;
}

InferStream::~InferStream() {
  context_.TryCancel();
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return status_.has_value(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), kDestroyTimeout)) {
    std::fprintf(stderr, "InferStream: the stream did not end within 60 s of its cancellation\n");
    std::abort();  // gRPC still refers to this object: better a visible crash than a use-after-free
  }
}

bool InferStream::Send(inference::ModelInferRequest request) {
  const inference::ModelInferRequest* write = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (close_wanted_ || reads_over_ || write_failed_) return false;
    to_write_.push_back(std::move(request));
    write = NextWriteLocked();
  }
  if (write != nullptr) StartWrite(write);
  return true;
}

const inference::ModelInferRequest* InferStream::NextWriteLocked() {
  if (writing_ || to_write_.empty() || write_failed_) return nullptr;
  writing_ = true;
  return &to_write_.front();
}

bool InferStream::StartWritesDoneLocked() {
  if (!close_wanted_ || closed_ || writing_ || !to_write_.empty() || write_failed_ || reads_over_) return false;
  closed_ = writes_done_pending_ = true;
  return true;
}

bool InferStream::ReleaseHoldLocked() {
  if (hold_released_ || !reads_over_ || writing_ || writes_done_pending_) return false;
  hold_released_ = true;
  return true;
}

void InferStream::CloseSend() {
  bool now = false;
  {
    absl::MutexLock lock(&mu_);
    if (close_wanted_) return;
    close_wanted_ = true;
    // Marked in flight under the lock: a read that fails meanwhile leaves the hold to
    // OnWritesDoneDone, so the call cannot end, nor this object go, before StartWritesDone below.
    now = StartWritesDoneLocked();
  }
  if (now) StartWritesDone();
}

void InferStream::OnWriteDone(bool ok) {
  const inference::ModelInferRequest* write = nullptr;
  bool close = false;
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    to_write_.pop_front();
    if (!ok) write_failed_ = true;
    write = NextWriteLocked();
    close = StartWritesDoneLocked();
    release = ReleaseHoldLocked();
  }
  if (write != nullptr) StartWrite(write);
  if (close) StartWritesDone();
  if (release) RemoveHold();
}

void InferStream::OnWritesDoneDone(bool) {
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    writes_done_pending_ = false;
    release = ReleaseHoldLocked();
  }
  if (release) RemoveHold();
}

void InferStream::OnReadDone(bool ok) {
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    if (ok) {
      answers_.push_back(StreamAnswer{std::move(reading_), SteadyClock::Now()});
      reading_.Clear();
    } else {
      reads_over_ = true;
      release = ReleaseHoldLocked();  // otherwise OnWriteDone or OnWritesDoneDone releases it
    }
  }
  if (ok) {
    StartRead(&reading_);
  } else if (release) {
    RemoveHold();
  }
}

void InferStream::OnDone(const grpc::Status& status) {
  absl::MutexLock lock(&mu_);
  reads_over_ = true;
  status_ = status;
}

std::optional<StreamAnswer> InferStream::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !answers_.empty() || status_.has_value(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (answers_.empty()) return std::nullopt;
  StreamAnswer answer = std::move(answers_.front());
  answers_.pop_front();
  return answer;
}

std::optional<grpc::Status> InferStream::Finish(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return status_.has_value(); };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  return status_;
}

absl::StatusOr<InferResult> InferStream::Decode(const inference::ModelStreamInferResponse& response,
                                                const std::map<std::string, SharedMemoryRef>* output_shared_memory) {
  if (!response.error_message().empty()) {
    absl::StatusCode code = absl::StatusCode::kUnknown;
    const auto& params = response.infer_response().parameters();
    // A gRPC code (1-16) only: anything else (2^32 would wrap to OK, which no error may be) is UNKNOWN,
    // with the value named.
    std::string odd_code;
    if (auto it = params.find("error_code"); it != params.end() && it->second.int64_param() != 0) {
      const int64_t value = it->second.int64_param();
      if (value >= 1 && value <= 16) {
        code = static_cast<absl::StatusCode>(value);
      } else {
        odd_code = absl::StrCat(" (error_code ", value, " is no gRPC status code)");
      }
    }
    return absl::Status(code, absl::StrCat(response.error_message(), odd_code));
  }
  if (output_shared_memory == nullptr || output_shared_memory->empty()) {
    return InferenceClient::DecodeResponse(response.infer_response());
  }
  inference::ModelInferResponse marked = response.infer_response();
  InferenceClient::MarkAskedSharedMemory(*output_shared_memory, &marked);
  return InferenceClient::DecodeResponse(marked);
}

}  // namespace chronoserve::client
