#include "server/core/model_spec.h"

namespace chronoserve::server {
namespace {
int FindTensor(const std::vector<TensorSpec>& tensors, const std::string& name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}
}  // namespace

int ModelSpec::InputIndex(const std::string& tensor) const { return FindTensor(inputs, tensor); }
int ModelSpec::OutputIndex(const std::string& tensor) const { return FindTensor(outputs, tensor); }

}  // namespace chronoserve::server
