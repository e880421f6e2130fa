// Which config tensor is which of forward()'s arguments and outputs, by the rules of Triton's
// pytorch_libtorch backend: inputs named as forward()'s arguments go by name; names ending in
// `__<N>` go by N (outputs may then be a subset, in any order); otherwise the config's order.
// Before, the config's order was used always: a config listing OUTPUT__1 before OUTPUT__0 got the
// two swapped, with no error, since their dtype and dims matched.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "client/inference_client.h"
#include "common/tensor_data.h"
#include "tests/server/shared_server_test.h"
#include "tests/server/test_client.h"
#include "tests/server/test_repository.h"
#include "tests/server/torch_reference.h"

namespace chronoserve {
namespace {
using client::Tensor;
using ::testing::HasSubstr;

constexpr int kWidth = 6;

// forward(a, b) -> (a - b, a * 2 + b): no output equals another for the inputs below.
constexpr char kSource[] =
    "def forward(self, a, b):\n"
    "  return (a - b, a * 2.0 + b)\n";

std::string Tensors(const char* kind, const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    out += std::string(kind) + " { name: \"" + name + "\" data_type: TYPE_FP32 dims: " + std::to_string(kWidth) + " }\n";
  }
  return out;
}

// forward(a, b) -> (a - b, None): a second element that is no tensor.
constexpr char kSourceWithNone[] =
    "def forward(self, a, b):\n"
    "  return (a - b, None)\n";

void WriteModel(const testing::TempDir& repo, const std::string& model, const std::vector<std::string>& inputs,
                const std::vector<std::string>& outputs, const char* source = kSource) {
  repo.WriteFile(model + "/config.pbtxt", "max_batch_size: 2\n" + Tensors("input", inputs) +
                                              Tensors("output", outputs) + "instance_group { kind: KIND_CPU }\n");
  std::filesystem::create_directories(repo.path() + "/" + model + "/1");
  ASSERT_TRUE(testing::WriteScriptedModel(repo.path() + "/" + model + "/1/model.pt", source));
}

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

class TensorBindingTest : public testing::SharedServerTest<TensorBindingTest> {
 public:
  static constexpr char kRepoName[] = "cs_binding";
  static void WriteModels(const testing::TempDir& repo) {
    WriteModel(repo, "in_order", {"INPUT__0", "INPUT__1"}, {"OUTPUT__0", "OUTPUT__1"});
    WriteModel(repo, "swapped_indices", {"INPUT__1", "INPUT__0"}, {"OUTPUT__1", "OUTPUT__0"});
    WriteModel(repo, "by_argument_name", {"b", "a"}, {"difference", "combined"});
    WriteModel(repo, "one_output", {"x__0", "y__1"}, {"combined__1"});
    WriteModel(repo, "repeated_index", {"INPUT__0", "OTHER__0"}, {"OUTPUT__0", "OUTPUT__1"});
    WriteModel(repo, "index_past_arguments", {"INPUT__0", "INPUT__5"}, {"OUTPUT__0", "OUTPUT__1"});
    WriteModel(repo, "output_index_past_outputs", {"INPUT__0", "INPUT__1"}, {"OUTPUT__0", "OUTPUT__2"});
    WriteModel(repo, "none_unbound", {"INPUT__0", "INPUT__1"}, {"OUTPUT__0"}, kSourceWithNone);
    WriteModel(repo, "none_bound", {"INPUT__0", "INPUT__1"}, {"OUTPUT__1", "OUTPUT__0"}, kSourceWithNone);
  }

 protected:
  void SetUp() override {
    SharedServerTest::SetUp();
    if (HasFatalFailure()) return;
    std::mt19937_64 rng(91);
    a_ = RandomTensorBytes(DataType::kFp32, 2 * kWidth, rng);
    b_ = RandomTensorBytes(DataType::kFp32, 2 * kWidth, rng);
  }

  // Sends `a` as the config input named `a_name` and `b` as `b_name`; returns outputs by name.
  std::map<std::string, std::vector<float>> Infer(const std::string& model, const std::string& a_name,
                                                  const std::string& b_name) {
    // In the config's order or not, each tensor travels under its name.
    const Tensor ta{a_name, DataType::kFp32, {2, kWidth}, a_};
    const Tensor tb{b_name, DataType::kFp32, {2, kWidth}, b_};
    auto r = client_->Infer(model, {tb, ta});
    EXPECT_TRUE(r.ok()) << model << ": " << r.status();
    std::map<std::string, std::vector<float>> out;
    if (r.ok()) {
      for (const auto& o : r->outputs) out[o.name] = Floats(o.data);
    }
    return out;
  }
  std::vector<float> Difference() const {
    std::vector<float> a = Floats(a_), b = Floats(b_), d(a.size());
    for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
    return d;
  }
  std::vector<float> Combined() const {
    std::vector<float> a = Floats(a_), b = Floats(b_), c(a.size());
    for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] * 2.0f + b[i];
    return c;
  }
  std::string LoadError(const std::string& model) {
    auto r = client_->ModelMetadata(model, "1");
    EXPECT_FALSE(r.ok()) << model << " loaded";
    return std::string(r.status().message());
  }

  std::string a_, b_;
};

TEST_F(TensorBindingTest, IndexSuffixesBindInputsAndOutputsWhateverTheConfigOrder) {
  auto in_order = Infer("in_order", "INPUT__0", "INPUT__1");
  EXPECT_EQ(in_order["OUTPUT__0"], Difference());
  EXPECT_EQ(in_order["OUTPUT__1"], Combined());
  // INPUT__1 listed first is still forward()'s second argument; OUTPUT__1 listed first is still its
  // second output.
  auto swapped = Infer("swapped_indices", "INPUT__0", "INPUT__1");
  EXPECT_EQ(swapped["OUTPUT__0"], Difference());
  EXPECT_EQ(swapped["OUTPUT__1"], Combined());
}

TEST_F(TensorBindingTest, InputsNamedAsForwardsArgumentsBindByName) {
  auto named = Infer("by_argument_name", "a", "b");  // config lists b, then a
  EXPECT_EQ(named["difference"], Difference()) << "outputs without __N: the config's order";
  EXPECT_EQ(named["combined"], Combined());
}

TEST_F(TensorBindingTest, AConfigMayListASubsetOfIndexedOutputs) {
  auto one = Infer("one_output", "x__0", "y__1");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one["combined__1"], Combined());
}

// An element of forward()'s tuple that no config output is bound to may be anything (Triton's
// backend reads only the bound ones); one that is bound and no tensor fails the load naming the
// config output, not the config's order (OUTPUT__1 is listed first here, and is element 1).
TEST_F(TensorBindingTest, OnlyTheOutputsBoundMustBeTensors) {
  auto one = Infer("none_unbound", "INPUT__0", "INPUT__1");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one["OUTPUT__0"], Difference());
  EXPECT_THAT(LoadError("none_bound"),
              HasSubstr("forward() returned a tuple whose element 1 (output 'OUTPUT__1') is None, not a tensor"));
}

TEST_F(TensorBindingTest, ImpossibleBindingsFailTheLoadNamingTheTensors) {
  EXPECT_THAT(LoadError("repeated_index"),
              HasSubstr("model 'repeated_index': tensors 'INPUT__0' and 'OTHER__0' both name index 0"));
  EXPECT_THAT(LoadError("index_past_arguments"),
              HasSubstr("model 'index_past_arguments': input 'INPUT__5' names argument index 5, but forward() "
                        "takes 2 argument(s)"));
  EXPECT_THAT(LoadError("output_index_past_outputs"),
              HasSubstr("forward() returned 2 outputs, config declares 2 of which the highest __N needs 3"));
}

// Inputs `b` and `zz` on forward(a, b): not every input is named as an argument, so they bind in the
// config's order and `b` feeds argument `a`, as Triton's backend does. The load says so at WARNING,
// naming both (it was seen only with --log-verbose 1), and the model serves by that rule.
TEST(TensorBindingWarningTest, AnInputNamedAsAnotherArgumentIsWarnedAbout) {
  testing::TempDir repo("cs_binding_warning");
  WriteModel(repo, "partly_named", {"b", "zz"}, {"difference", "combined"});
  ::testing::internal::CaptureStderr();
  auto server = testing::StartServer(repo.path());
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_NE(server, nullptr) << log;
  EXPECT_THAT(log, HasSubstr("model 'partly_named': input 'b' is bound to forward()'s argument 0 ('a') by config "
                             "order, though forward() has an argument named 'b' (1): inputs bind by name only when "
                             "every one is named as an argument, and zz is not"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("input 'zz' is bound"))) << "zz names no argument";
  // And the model is served by that rule: b is forward()'s a.
  std::mt19937_64 rng(17);
  const std::string b = RandomTensorBytes(DataType::kFp32, kWidth, rng);
  const std::string zz = RandomTensorBytes(DataType::kFp32, kWidth, rng);
  auto client = testing::ConnectTestClient("127.0.0.1:" + std::to_string(server->port()));
  auto r = client->Infer("partly_named", {Tensor{"b", DataType::kFp32, {1, kWidth}, b},
                                          Tensor{"zz", DataType::kFp32, {1, kWidth}, zz}});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<float> fb = Floats(b), fz = Floats(zz), got = Floats(r->outputs[0].data);
  ASSERT_EQ(got.size(), fb.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], fb[i] - fz[i]) << "difference = b - zz at " << i;
}

}  // namespace
}  // namespace chronoserve
