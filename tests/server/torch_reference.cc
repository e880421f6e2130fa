#include "tests/server/torch_reference.h"

#include <torch/script.h>
#include <torch/csrc/jit/frontend/resolver.h>
#include <torch/csrc/jit/frontend/sugared_value.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/tensor_data.h"

namespace chronoserve::testing {

std::vector<std::vector<float>> TorchReference(const std::string& model_path,
                                               const std::vector<client::Tensor>& inputs) {
  torch::jit::Module module = torch::jit::load(model_path);
  module.eval();
  at::NoGradGuard no_grad;
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

std::string ReferenceMismatch(const std::string& got, const std::vector<float>& want, float tolerance) {
  if (got.size() != want.size() * 4) return "wrong output size";
  for (size_t k = 0; k < want.size(); ++k) {
    float y;
    std::memcpy(&y, got.data() + 4 * k, 4);
    if (!(std::fabs(y - want[k]) <= tolerance)) return "rows of another request?";  // NaN fails too
  }
  return {};
}

std::string OutputsMismatch(const std::string& model_path, const std::vector<client::Tensor>& inputs,
                            const std::vector<client::Tensor>& outputs, float tolerance) {
  const std::vector<std::vector<float>> want = TorchReference(model_path, inputs);
  if (outputs.size() != want.size()) {
    return std::to_string(outputs.size()) + " outputs, the model has " + std::to_string(want.size());
  }
  for (size_t k = 0; k < want.size(); ++k) {
    const std::string mismatch = ReferenceMismatch(outputs[k].data, want[k], tolerance);
    if (!mismatch.empty()) return "output " + std::to_string(k) + " (" + outputs[k].name + "): " + mismatch;
  }
  return {};
}

std::vector<client::Tensor> AddSubInputs(int64_t items, int64_t length, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<client::Tensor> inputs;
  for (const char* name : {"INPUT__0", "INPUT__1"}) {
    inputs.push_back(
        {name, DataType::kFp32, {items, length}, RandomTensorBytes(DataType::kFp32, items * length, rng)});
  }
  return inputs;
}

std::string AddSubMismatch(const client::Tensor& a, const client::Tensor& b, const std::vector<client::Tensor>& outputs) {
  if (outputs.size() != 2) return "addsub: " + std::to_string(outputs.size()) + " outputs";
  const size_t n = a.data.size() / 4;
  if (outputs[0].data.size() != 4 * n || outputs[1].data.size() != 4 * n) return "addsub: wrong output size";
  for (size_t k = 0; k < n; ++k) {
    float x, y, sum, diff;
    std::memcpy(&x, a.data.data() + 4 * k, 4);
    std::memcpy(&y, b.data.data() + 4 * k, 4);
    std::memcpy(&sum, outputs[0].data.data() + 4 * k, 4);
    std::memcpy(&diff, outputs[1].data.data() + 4 * k, 4);
    if (sum != x + y || diff != x - y) return "addsub: rows of another request?";
  }
  return {};
}

bool WriteScriptedModel(const std::string& model_path, const std::string& source) {
  try {
    torch::jit::Module module("scripted");
    module.define(source);
    module.save(model_path);
    return true;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "writing " << model_path << ": " << e.what();
    return false;
  }
}

namespace {
// Resolves `ops.<namespace>.<op>` as TorchScript's importer does (define()'s own resolver knows only
// `torch`, i.e. aten), so a module can call an operator of another namespace.
class OpsNamespaces final : public torch::jit::SugaredValue {
 public:
  std::string kind() const override { return "ops"; }
  std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange&, torch::jit::GraphFunction&,
                                                 const std::string& field) override {
    return std::make_shared<torch::jit::BuiltinModule>(field);
  }
};
class OpsResolver final : public torch::jit::Resolver {
 public:
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name, torch::jit::GraphFunction& m,
                                                         const torch::jit::SourceRange& loc) override {
    if (name == "ops") return std::make_shared<OpsNamespaces>();
    return torch::jit::nativeResolver()->resolveValue(name, m, loc);
  }
  torch::jit::TypePtr resolveType(const std::string&, const torch::jit::SourceRange&) override { return nullptr; }
};
}  // namespace

bool WriteModelCallingAVanishedOperator(const std::string& model_path) {
  try {
    torch::RegisterOperators registration("chronoserve_test::vanished(Tensor x) -> Tensor",
                                          [](at::Tensor x) { return x * 2; });
    torch::jit::Module module("vanished");
    module.define("def forward(self, x):\n  return ops.chronoserve_test.vanished(x)\n",
                  std::make_shared<OpsResolver>());
    module.save(model_path);
    return true;  // `registration` goes here, and the operator with it
  } catch (const std::exception& e) {
    ADD_FAILURE() << "writing " << model_path << ": " << e.what();
    return false;
  }
}

}  // namespace chronoserve::testing
