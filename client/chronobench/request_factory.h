// RequestFactory: turns the model's metadata plus --shape / --input-data / batch size into the
// ModelInferRequest chronobench sends. A leading -1 in a metadata shape is the batch dimension
// (chronoserve, like Triton, reports it for models with max_batch_size > 0); every other -1 must be
// given by --shape. Inputs are random (never zeros) unless a JSON file supplies one sample per
// input. Built once on the main thread; Build() is const and thread-safe.
#ifndef CHRONOSERVE_CLIENT_CHRONOBENCH_REQUEST_FACTORY_H_
#define CHRONOSERVE_CLIENT_CHRONOBENCH_REQUEST_FACTORY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/chronobench/bench_options.h"
#include "client/inference_client.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/inference.pb.h"

namespace chronoserve::client::bench {

// The JSON document in --input-data's file `path` (its shapes and values are checked against the
// model later, by RequestFactory::Create): INVALID_ARGUMENT naming --input-data, the path and, when
// it is not JSON, the parser's error.
absl::StatusOr<std::shared_ptr<const nlohmann::json>> ReadInputDataFile(const std::string& path);

class RequestFactory {
 public:
  // INVALID_ARGUMENT when a variable dim has no --shape, a --shape names no input, the inputs of
  // one sample take more than kMaxRequestBytes, or the input file does not match the model.
  static absl::StatusOr<RequestFactory> Create(const inference::ModelMetadataResponse& metadata,
                                               const InputOptions& input, uint64_t seed);

  // The request for `batch_size` samples; INVALID_ARGUMENT if the model has no batch dimension
  // and batch_size > 1, or the inputs at that batch size take more than kMaxRequestBytes.
  absl::StatusOr<inference::ModelInferRequest> Build(const std::string& model_version,
                                                     int64_t batch_size) const;
  bool batched() const { return batched_; }
  // Per-sample shapes actually sent (for the report).
  std::map<std::string, std::vector<int64_t>> SampleShapes() const;

 private:
  struct InputSpec {
    std::string name;
    DataType dtype = DataType::kFp32;
    std::vector<int64_t> sample_shape;  // without the batch dim
    std::string sample_bytes;           // from --input-data FILE; empty = random
    bool shape_from_flag = false;       // sample_shape came from --shape
  };
  // OK when the inputs of a request of `batch_size` samples take at most kMaxRequestBytes together,
  // and the whole message, protobuf's framing and a send's own fields included, does too; otherwise
  // INVALID_ARGUMENT naming the input that passes it (with its --shape, when one gave it), its
  // datatype and shape, or the message's size, before any tensor byte is allocated.
  absl::Status CheckRequestBytes(int64_t batch_size) const;
  // `spec`'s name, datatype and shape in a request of `batch_size` samples; no data.
  Tensor EmptyTensor(const InputSpec& spec, int64_t batch_size) const;
  // Fills sample_bytes of each input from `doc`, --input-data's file `path` parsed:
  // {"NAME": [numbers...], ...}.
  absl::Status LoadInputData(const nlohmann::json& doc, const std::string& path);

  std::string model_;
  bool batched_ = false;
  uint64_t seed_ = 1;
  std::vector<InputSpec> inputs_;
};

}  // namespace chronoserve::client::bench

#endif  // CHRONOSERVE_CLIENT_CHRONOBENCH_REQUEST_FACTORY_H_
