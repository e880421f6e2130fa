#include "tools/example_models.h"

#include <torch/script.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chronoserve::examples {
namespace fs = std::filesystem;

namespace {

struct Tensor {
  std::string name;
  DataType type;
  std::vector<int64_t> dims;
};

std::string TensorBlock(const char* kind, const Tensor& t) {
  return absl::StrCat(kind, " {\n  name: \"", t.name, "\"\n  data_type: ", ConfigTypeName(t.type),
                      "\n  dims: [ ", absl::StrJoin(t.dims, ", "), " ]\n}\n");
}

std::string ConfigText(const std::string& name, const std::vector<Tensor>& inputs,
                       const std::vector<Tensor>& outputs, const ModelOptions& o) {
  std::string text = absl::StrCat("name: \"", name, "\"\nplatform: \"pytorch_libtorch\"\nmax_batch_size: ",
                                  o.max_batch_size, "\n");
  for (const auto& t : inputs) absl::StrAppend(&text, TensorBlock("input", t));
  for (const auto& t : outputs) absl::StrAppend(&text, TensorBlock("output", t));
  absl::StrAppend(&text, "instance_group [ { count: ", o.instance_count, " kind: ", o.instance_kind, " } ]\n");
  if (o.dynamic_batching && o.max_batch_size > 0) {
    absl::StrAppend(&text, "dynamic_batching { max_queue_delay_microseconds: ", o.max_queue_delay_us, " }\n");
  }
  absl::StrAppend(&text, o.extra_config);
  return text;
}

absl::Status Save(const std::string& repository, const std::string& name, torch::jit::Module& module,
                  const std::string& config) {
  const fs::path dir = fs::path(repository) / name;
  std::error_code ec;
  fs::create_directories(dir / "1", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  try {
    module.save((dir / "1" / "model.pt").string());
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("cannot save model '", name, "': ", e.what_without_backtrace()));
  }
  std::ofstream out(dir / "config.pbtxt");
  out << config;
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", (dir / "config.pbtxt").string()));
  return absl::OkStatus();
}

torch::Tensor Weight(std::vector<int64_t> shape, double scale) {
  return torch::randn(shape) * scale;
}

}  // namespace

std::string ConfigTypeName(DataType type) { return absl::StrCat("TYPE_", DataTypeName(type)); }

absl::Status WritePolicyNet(const std::string& repository, const std::string& name,
                            const ModelOptions& options) {
  at::manual_seed(options.seed);
  torch::jit::Module m("PolicyNet");
  m.register_parameter("w1", Weight({32, 4, 3, 3}, 0.2), false);
  m.register_parameter("b1", Weight({32}, 0.1), false);
  m.register_parameter("w2", Weight({64, 32, 3, 3}, 0.06), false);
  m.register_parameter("b2", Weight({64}, 0.1), false);
  m.register_parameter("pw", Weight({400, 64}, 0.1), false);
  m.register_parameter("pb", Weight({400}, 0.1), false);
  m.register_parameter("vw", Weight({1, 64}, 0.1), false);
  m.register_parameter("vb", Weight({1}, 0.1), false);
  m.register_parameter("aw", Weight({400, 64}, 0.1), false);
  m.register_parameter("ab", Weight({400}, 0.1), false);
  m.define(R"JIT(
def forward(self, x):
    h = torch.relu(torch.conv2d(x, self.w1, self.b1, [1, 1], [1, 1]))
    h = torch.relu(torch.conv2d(h, self.w2, self.b2, [1, 1], [1, 1]))
    p = torch.mean(h, [2, 3])
    return (torch.linear(p, self.pw, self.pb), torch.linear(p, self.vw, self.vb), torch.linear(p, self.aw, self.ab))
)JIT");
  const std::string config =
      ConfigText(name, {{"INPUT__0", DataType::kFp32, {4, 20, 20}}},
                 {{"OUTPUT__0", DataType::kFp32, {400}},
                  {"OUTPUT__1", DataType::kFp32, {1}},
                  {"OUTPUT__2", DataType::kFp32, {400}}},
                 options);
  return Save(repository, name, m, config);
}

absl::Status WriteMlp(const std::string& repository, const std::string& name,
                      const ModelOptions& options) {
  at::manual_seed(options.seed);
  torch::jit::Module m("Mlp");
  m.register_parameter("w1", Weight({128, 64}, 0.1), false);
  m.register_parameter("b1", Weight({128}, 0.1), false);
  m.register_parameter("w2", Weight({16, 128}, 0.1), false);
  m.register_parameter("b2", Weight({16}, 0.1), false);
  m.define(R"JIT(
def forward(self, x):
    return torch.linear(torch.relu(torch.linear(x, self.w1, self.b1)), self.w2, self.b2)
)JIT");
  const std::string config = ConfigText(name, {{"INPUT__0", DataType::kFp32, {64}}},
                                        {{"OUTPUT__0", DataType::kFp32, {16}}}, options);
  return Save(repository, name, m, config);
}

absl::Status WriteScaleModel(const std::string& repository, const std::string& name, DataType type,
                             const ModelOptions& options) {
  torch::jit::Module m("Scale");
  m.define(type == DataType::kBool ? "def forward(self, x):\n    return torch.logical_not(x)\n"
                                   : "def forward(self, x):\n    return x * 2\n");
  const std::string config =
      ConfigText(name, {{"INPUT__0", type, {3}}}, {{"OUTPUT__0", type, {3}}}, options);
  return Save(repository, name, m, config);
}

absl::Status WriteAddSub(const std::string& repository, const std::string& name,
                         const ModelOptions& options) {
  torch::jit::Module m("AddSub");
  m.define("def forward(self, a, b):\n    return (a + b, a - b)\n");
  const std::string config =
      ConfigText(name, {{"INPUT__0", DataType::kFp32, {-1}}, {"INPUT__1", DataType::kFp32, {-1}}},
                 {{"OUTPUT__0", DataType::kFp32, {-1}}, {"OUTPUT__1", DataType::kFp32, {-1}}}, options);
  return Save(repository, name, m, config);
}

absl::Status WriteExampleRepository(const std::string& repository) {
  ModelOptions policy;
  policy.max_batch_size = 128;
  if (absl::Status s = WritePolicyNet(repository, "policy_net", policy); !s.ok()) return s;
  ModelOptions mlp;
  mlp.max_batch_size = 64;
  return WriteMlp(repository, "mlp", mlp);
}

}  // namespace chronoserve::examples
