#include "tests/server/torch_reference.h"

#include <torch/script.h>
#include <torch/torch.h>

namespace chronoserve::testing {

std::vector<std::vector<float>> TorchReference(const std::string& model_path,
                                               const std::vector<client::Tensor>& inputs) {
  torch::jit::Module module = torch::jit::load(model_path);
  module.eval();
  torch::NoGradGuard no_grad;
  std::vector<torch::jit::IValue> args;
  for (const auto& t : inputs) {
    EXPECT_EQ(t.dtype, DataType::kFp32);
    auto tensor = torch::from_blob(const_cast<char*>(t.data.data()), t.shape, torch::kFloat).clone();
    args.emplace_back(tensor);
  }
  torch::jit::IValue out = module.forward(args);
  std::vector<torch::Tensor> tensors;
  if (out.isTensor()) {
    tensors.push_back(out.toTensor());
  } else {
    for (const auto& e : out.toTuple()->elements()) tensors.push_back(e.toTensor());
  }
  std::vector<std::vector<float>> result;
  for (auto& t : tensors) {
    t = t.contiguous().to(torch::kFloat);
    result.emplace_back(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  return result;
}

}  // namespace chronoserve::testing
