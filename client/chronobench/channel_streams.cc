#include "client/chronobench/channel_streams.h"

namespace chronoserve::client::bench {

LoadStream* ChannelStreams::For(size_t channel) {
  if (streams_.size() < stubs_->size()) streams_.resize(stubs_->size());
  std::unique_ptr<LoadStream>& stream = streams_[channel];
  // A failed stream refuses requests from its first failed operation on, but ends only when its
  // Finish returns: replace it at once, so that no request is handed to a stream that drops it.
  if (stream == nullptr || !stream->accepting()) {
    if (stream != nullptr) ended_.push_back(std::move(stream));  // fails what it holds at its Finish
    stream = std::make_unique<LoadStream>(&(*stubs_)[channel], cq_, *request_);
  }
  return stream.get();
}

void ChannelStreams::OnEvent(LoadStream::Tag* tag, bool ok, const LoadStream::OnAnswer& on_answer) {
  tag->stream->OnEvent(tag->op, ok, on_answer);
  for (auto it = ended_.begin(); it != ended_.end();) {
    it = (*it)->done() ? ended_.erase(it) : it + 1;
  }
}

void ChannelStreams::CancelAll() {
  for (auto& s : streams_) {
    if (s != nullptr) s->Cancel();
  }
  for (auto& s : ended_) s->Cancel();  // failing already; this only hurries their Finish
}

bool ChannelStreams::AllDone() const {
  for (const auto& s : streams_) {
    if (s != nullptr && !s->done()) return false;
  }
  return ended_.empty();
}

}  // namespace chronoserve::client::bench
