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

std::string ModelSpec::Label() const {
  std::string label = "model '" + name + "'";
  if (one_of_several_versions) label += " version " + std::to_string(version);
  return label;
}

int ModelSpec::InputIndex(const std::string& tensor) const { return FindTensor(inputs, tensor); }
int ModelSpec::OutputIndex(const std::string& tensor) const { return FindTensor(outputs, tensor); }

}  // namespace chronoserve::server
