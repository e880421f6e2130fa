// RequestFactory on model metadata written here (no server): a --shape, or a batch size, whose
// inputs pass what one request can carry (protobuf's 2 GiB), or int64 itself, is refused with
// INVALID_ARGUMENT naming the flag, the input and the value, before any byte is allocated (it built
// std::string(size_t(-1) * 4) and chronobench aborted).
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "client/chronobench/bench_flags.h"
#include "client/chronobench/bench_options.h"
#include "client/chronobench/request_factory.h"
#include "gtest/gtest.h"
#include "proto/inference.pb.h"

namespace chronoserve::client::bench {
namespace {

// A model "m" with one FP32 input of `dims` (a leading -1: the batch dim).
inference::ModelMetadataResponse Metadata(const std::vector<int64_t>& dims) {
  inference::ModelMetadataResponse metadata;
  metadata.set_name("m");
  auto* input = metadata.add_inputs();
  input->set_name("INPUT__0");
  input->set_datatype("FP32");
  for (int64_t d : dims) input->add_shape(d);
  return metadata;
}

absl::StatusOr<RequestFactory> Create(const std::vector<int64_t>& model_dims, const std::vector<int64_t>& shape) {
  InputOptions input;
  input.shapes["INPUT__0"] = shape;
  return RequestFactory::Create(Metadata(model_dims), input, /*seed=*/3);
}

void ExpectRefusedNaming(const absl::Status& status, const std::string& value) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("--shape INPUT__0:" + value), std::string::npos) << status;
  EXPECT_NE(status.message().find("input 'INPUT__0' (FP32"), std::string::npos) << status;
}

TEST(RequestFactoryTest, ShapeWhoseElementCountOverflowsIsRefused) {
  absl::StatusOr<RequestFactory> factory = Create({-1, -1, -1}, {3037000500, 3037000500});  // 2^63 + ...
  ASSERT_FALSE(factory.ok());
  ExpectRefusedNaming(factory.status(), "3037000500,3037000500");
  EXPECT_NE(factory.status().message().find("more bytes than int64 holds"), std::string::npos) << factory.status();
}

TEST(RequestFactoryTest, ShapeLargerThanARequestCanCarryIsRefused) {
  // 10^10 FP32 elements: 40 GB, no overflow, but far past protobuf's 2 GiB.
  absl::StatusOr<RequestFactory> factory = Create({-1, -1, -1}, {100'000, 100'000});
  ASSERT_FALSE(factory.ok());
  ExpectRefusedNaming(factory.status(), "100000,100000");
  EXPECT_NE(factory.status().message().find("40000000000 bytes"), std::string::npos) << factory.status();
  // One float past the limit (2^29 elements of 4 bytes = 2 GiB) is refused; one below is not.
  EXPECT_FALSE(Create({-1, -1, -1}, {1 << 14, 1 << 15}).ok());
  EXPECT_TRUE(Create({-1, -1, -1}, {1 << 14, (1 << 15) - 1}).ok());
}

// Tensors that fit by a few bytes still make a message past the limit once protobuf frames them
// (names, datatype, shape, each entry's tag and length) and a send adds its id and trace context.
TEST(RequestFactoryTest, InputsThatFitButWhoseMessageDoesNotAreRefused) {
  constexpr int64_t kMaxFloats = kMaxRequestBytes / 4;  // 2147483644 bytes: the tensor alone fits
  absl::StatusOr<RequestFactory> framed = Create({-1, -1}, {kMaxFloats});
  ASSERT_FALSE(framed.ok());
  EXPECT_EQ(framed.status().code(), absl::StatusCode::kInvalidArgument) << framed.status();
  EXPECT_NE(framed.status().message().find("model 'm': a request of batch size 1 takes "), std::string::npos)
      << framed.status();
  EXPECT_NE(framed.status().message().find("with protobuf's framing (its inputs 2147483644)"), std::string::npos)
      << framed.status();
  // 300 floats fewer leave room for the framing and a send's fields.
  EXPECT_TRUE(Create({-1, -1}, {kMaxFloats - 300}).ok());
}

TEST(RequestFactoryTest, BatchSizeThatTakesTheRequestPastTheLimitIsRefusedInBuild) {
  absl::StatusOr<RequestFactory> factory = Create({-1, -1, -1}, {4, 8});
  ASSERT_TRUE(factory.ok()) << factory.status();
  absl::StatusOr<inference::ModelInferRequest> huge = factory->Build("", int64_t{1} << 30);  // -b's largest
  ASSERT_FALSE(huge.ok());
  ExpectRefusedNaming(huge.status(), "4,8");
  EXPECT_NE(huge.status().message().find("shape [1073741824,4,8]"), std::string::npos) << huge.status();

  absl::StatusOr<inference::ModelInferRequest> request = factory->Build("", 3);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->raw_input_contents_size(), 1);
  const std::string& bytes = request->raw_input_contents(0);
  EXPECT_EQ(bytes.size(), 3u * 4 * 8 * sizeof(float));
  EXPECT_NE(bytes, std::string(bytes.size(), '\0')) << "random inputs, never zeros";
}

// The same shape given as a flag: refused at parse time (exit 2), whatever the datatype, since
// every element takes a byte at least.
TEST(RequestFactoryTest, ShapeFlagPastTheLimitIsABadFlag) {
  for (const char* shape : {"INPUT__0:3037000500,3037000500", "INPUT__0:65536,65536"}) {
    absl::StatusOr<BenchOptions> options = ParseBenchFlags({"chronobench", "-m", "m", "--shape", shape});
    ASSERT_FALSE(options.ok()) << shape;
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument) << options.status();
    EXPECT_NE(options.status().message().find(std::string("--shape ") + shape), std::string::npos) << options.status();
  }
  EXPECT_TRUE(ParseBenchFlags({"chronobench", "-m", "m", "--shape", "INPUT__0:32768,65535"}).ok());
}

// --input-data FILE: one sample's values per input, repeated for each item; a value an integer input
// cannot hold, a file that is not JSON and a file that does not open are refused, naming what.
TEST(RequestFactoryTest, InputDataFileValuesAreCheckedAgainstTheInputsType) {
  char path_template[] = "/tmp/cb_input_data_XXXXXX";
  const int fd = ::mkstemp(path_template);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = path_template;
  auto write = [&path](const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  };
  inference::ModelMetadataResponse metadata;
  metadata.set_name("m");
  auto* input = metadata.add_inputs();
  input->set_name("PIXELS");
  input->set_datatype("UINT8");
  input->add_shape(-1);
  input->add_shape(3);
  InputOptions options;
  options.input_data = path;

  write(R"({"PIXELS": [7, 255, true]})");
  absl::StatusOr<RequestFactory> good = RequestFactory::Create(metadata, options, 3);
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<inference::ModelInferRequest> request = good->Build("", 2);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->raw_input_contents_size(), 1);
  EXPECT_EQ(request->raw_input_contents(0), std::string("\x07\xff\x01\x07\xff\x01", 6)) << "the sample twice";

  for (const char* bad : {R"({"PIXELS": [7, 256, 1]})", R"({"PIXELS": [7, -1, 1]})", R"({"PIXELS": [7, 1e300, 1]})"}) {
    write(bad);
    absl::StatusOr<RequestFactory> refused = RequestFactory::Create(metadata, options, 3);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("value 1 of input 'PIXELS': value "), std::string::npos) << refused.status();
    EXPECT_NE(refused.status().message().find("does not fit UINT8"), std::string::npos) << refused.status();
  }

  // The flags read the file once; the factory builds from that document, not from the file again.
  write(R"({"PIXELS": [9, 8, 7]})");
  absl::StatusOr<BenchOptions> parsed = ParseBenchFlags({"cb", "-m", "m", "--input-data", path});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_NE(parsed->input.input_document, nullptr);
  write(R"({"PIXELS": [1, 2, 3]})");
  absl::StatusOr<RequestFactory> from_flags = RequestFactory::Create(metadata, parsed->input, 3);
  ASSERT_TRUE(from_flags.ok()) << from_flags.status();
  request = from_flags->Build("", 1);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->raw_input_contents(0), std::string("\x09\x08\x07", 3)) << "the values the flags read";

  write("{\"PIXELS\": [7, 8,");
  const absl::Status broken = ReadInputDataFile(path).status();
  EXPECT_EQ(broken.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(broken.message().find("not JSON: "), std::string::npos) << broken;
  EXPECT_NE(broken.message().find("parse error"), std::string::npos) << "the parser's own words: " << broken;
  auto flags = ParseBenchFlags({"cb", "-m", "m", "--input-data", path});
  EXPECT_FALSE(flags.ok()) << "a flag error, before any connection";

  ::unlink(path.c_str());
  auto missing = ParseBenchFlags({"cb", "-m", "m", "--input-data", path});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--input-data: cannot open '" + path + "'"), std::string::npos)
      << missing.status();

  // A directory opens as a stream and fails on its first read: a flag error too, not an abort.
  const std::string dir = ::testing::TempDir();
  auto directory = ParseBenchFlags({"cb", "-m", "m", "--input-data", dir});
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("is a directory, not a JSON file"), std::string::npos)
      << directory.status();
}

// Integer inputs take the file's integers exactly, 64-bit ones included (a double holds 53 bits:
// 2^53 + 1 would be sent as 2^53), and refuse a number with a fraction rather than cut it.
TEST(RequestFactoryTest, InputDataIntegersArePassedExactlyAndFractionsRefused) {
  char path_template[] = "/tmp/cb_input_ints_XXXXXX";
  const int fd = ::mkstemp(path_template);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = path_template;
  auto write = [&path](const std::string& text) { std::ofstream(path, std::ios::trunc) << text; };
  inference::ModelMetadataResponse metadata;
  metadata.set_name("m");
  for (const char* type : {"INT64", "UINT64"}) {
    auto* input = metadata.add_inputs();
    input->set_name(type);
    input->set_datatype(type);
    input->add_shape(-1);
    input->add_shape(3);
  }
  InputOptions options;
  options.input_data = path;
  auto bytes_of = [](auto... values) {
    std::string out;
    for (auto v : {values...}) out.append(reinterpret_cast<const char*>(&v), sizeof(v));
    return out;
  };

  write(R"({"INT64": [9007199254740993, -9223372036854775808, 9223372036854775807],
            "UINT64": [18446744073709551615, 9007199254740993, 2.0]})");
  absl::StatusOr<RequestFactory> good = RequestFactory::Create(metadata, options, 3);
  ASSERT_TRUE(good.ok()) << good.status();
  absl::StatusOr<inference::ModelInferRequest> request = good->Build("", 1);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->raw_input_contents_size(), 2);
  EXPECT_EQ(request->raw_input_contents(0),
            bytes_of(int64_t{9007199254740993}, std::numeric_limits<int64_t>::lowest(),
                     std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(request->raw_input_contents(1),
            bytes_of(std::numeric_limits<uint64_t>::max(), uint64_t{9007199254740993}, uint64_t{2}));

  struct Refused {
    std::string file, message;
  };
  const Refused cases[] = {
      {R"({"INT64": [1, 1.9, 3], "UINT64": [1, 2, 3]})", "value 1 of input 'INT64': value 1.9 is not a whole number, which INT64 needs"},
      {R"({"INT64": [1, 2, -2.5], "UINT64": [1, 2, 3]})", "value 2 of input 'INT64': value -2.5 is not a whole number"},
      {R"({"INT64": [1, 2, 3], "UINT64": [1, -1, 3]})", "value 1 of input 'UINT64': value -1 does not fit UINT64"},
      {R"({"INT64": [9223372036854775808, 2, 3], "UINT64": [1, 2, 3]})",
       "value 0 of input 'INT64': value 9223372036854775808 does not fit INT64"},
      {R"({"INT64": [1, 2, 3], "UINT64": [1, 2, 1e20]})", "value 2 of input 'UINT64': value 1e+20 does not fit UINT64"},
  };
  for (const Refused& c : cases) {
    write(c.file);
    absl::StatusOr<RequestFactory> refused = RequestFactory::Create(metadata, options, 3);
    ASSERT_FALSE(refused.ok()) << c.file;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(c.message), std::string::npos) << refused.status();
  }
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace chronoserve::client::bench
