// TestDir, the tests' scratch directory: removed with its contents when destroyed, once (a
// moved-from TestDir removes nothing).
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "tests/client/test_server.h"

namespace chronoserve::testing {
namespace {

TEST(TestDirTest, RemovesItsTreeWhenDestroyedAndOnlyOnceWhenMoved) {
  std::string path;
  {
    absl::StatusOr<TestDir> dir = TestDir::Create("test_dir");
    ASSERT_TRUE(dir.ok()) << dir.status();
    path = dir->path();
    ASSERT_TRUE(std::filesystem::is_directory(path));
    std::filesystem::create_directories(path + "/models/mlp/1");
    std::ofstream(path + "/models/mlp/1/model.pt") << "not empty";
    TestDir moved(*std::move(dir));
    EXPECT_TRUE(dir->path().empty());
    EXPECT_EQ(moved.path(), path);
    std::optional<TestDir> other;
    {
      absl::StatusOr<TestDir> second = TestDir::Create("test_dir");
      ASSERT_TRUE(second.ok()) << second.status();
      EXPECT_NE(second->path(), path);
      other.emplace(*std::move(second));
    }
    const std::string other_path = other->path();
    EXPECT_TRUE(std::filesystem::is_directory(other_path)) << "the moved-from TestDir removed it";
    other.reset();
    EXPECT_FALSE(std::filesystem::exists(other_path));
    EXPECT_TRUE(std::filesystem::exists(path + "/models/mlp/1/model.pt"));
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "left behind: " << path;
}

}  // namespace
}  // namespace chronoserve::testing
