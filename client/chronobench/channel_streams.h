// ChannelStreams: a LoadWorker's ModelStreamInfer streams (--streaming), one LoadStream per channel,
// all on the worker's completion queue. A stream is opened when its channel is first used and
// replaced as soon as it no longer accepts requests (it failed, or ended), so that no request is
// handed to a stream that would drop it; a replaced stream is kept until it has returned its last
// tag (its Finish fails what it still holds). At the end of the load the worker cancels them all and
// hands their events back until AllDone(). Owned by a LoadWorker and used only on its thread.
//
//   ChannelStreams streams(&stubs, &cq, &request);
//   streams.For(channel)->Send(seq, nullptr, traceparent);
//   on a cq event whose tag is a LoadStream::Tag*: streams.OnEvent(tag, ok, on_answer);
//   streams.CancelAll();  ... keep handing events until streams.AllDone();  streams.Clear();
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_CHANNEL_STREAMS_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_CHANNEL_STREAMS_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "client/chronobench/channel_stubs.h"
#include "client/chronobench/load_stream.h"
#include "proto/inference.grpc.pb.h"

namespace chronoserve::client::bench {

class ChannelStreams {
 public:
  // `stubs` (one per channel), `cq` and `request` (the base request of every stream) outlive this.
  ChannelStreams(std::vector<ChannelStubs>* stubs, grpc::CompletionQueue* cq,
                 const inference::ModelInferRequest* request)
      : stubs_(stubs), cq_(cq), request_(request) {}
  ChannelStreams(const ChannelStreams&) = delete;
  ChannelStreams& operator=(const ChannelStreams&) = delete;

  // The stream for channel `channel`, opened (again) when it has none or it no longer accepts
  // requests (it failed, or ended).
  LoadStream* For(size_t channel);
  // Hands one of a stream's events to it (`on_answer` for each request it answered or failed),
  // then lets go of the replaced streams that are done.
  void OnEvent(LoadStream::Tag* tag, bool ok, const LoadStream::OnAnswer& on_answer);
  // Cancels every stream, the replaced ones too (failing already; this only hurries their Finish).
  void CancelAll();
  // Every stream has returned its last tag.
  bool AllDone() const;
  // Lets go of the current streams (once AllDone()).
  void Clear() { streams_.clear(); }

 private:
  std::vector<ChannelStubs>* const stubs_;
  grpc::CompletionQueue* const cq_;
  const inference::ModelInferRequest* const request_;
  std::vector<std::unique_ptr<LoadStream>> streams_;  // by channel
  std::vector<std::unique_ptr<LoadStream>> ended_;    // replaced streams until their last event
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_CHANNEL_STREAMS_H_
