// ModelController on its own (no gRPC), real models: loads of different models run side by side,
// one model's requests run one after another in order, the same request made again while the
// first still waits shares its run, and an unload does not wait for a busy load thread.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "server/backend/device_activity.h"
#include "server/model_controller.h"
#include "server/scheduler/model_registry.h"
#include "tests/fakes/finishes_within.h"
#include "tests/server/test_repository.h"
#include "tools/example_models.h"

namespace chronoserve {
namespace {

// A done callback that keeps its status and notifies.
struct Answer {
  absl::Notification answered;
  absl::Status status;
  server::ModelControl::Done Callback() {
    return [this](absl::Status s) {
      status = std::move(s);
      answered.Notify();
    };
  }
};

// Stop, which must end a load in progress (an endless warm-up) within a minute: a regression fails
// the test naming it, instead of hanging until CTest's timeout.
void StopWithin(server::ModelController& controller) {
  testing::FinishesWithin("ModelController::Stop", absl::Seconds(60), [&] { controller.Stop(); });
}

class ModelControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteMlpNamed("a");
    WriteMlpNamed("b");
    WriteEndless("endless");
  }

  std::unique_ptr<server::ModelController> Controller(int threads) {
    server::ModelLoadOptions options;
    options.warmup.runs_per_batch_size = 1;
    server::ModelController::Hooks hooks;
    hooks.loaded = [this](const server::ModelRuntime&) { loads_.fetch_add(1); };
    // Called once the new runtime is in the registry (the serving warm-up's turn).
    hooks.warm_serving_path = [this](const server::ModelSpec& spec, const std::atomic<bool>*) {
      absl::MutexLock lock(&mu_);
      loaded_.push_back(spec.name);
    };
    hooks.load_started = [this](const std::string& model) {
      absl::MutexLock lock(&mu_);
      started_.push_back(model);
    };
    auto controller = std::make_unique<server::ModelController>(&registry_, &devices_, repo_.path(), options,
                                                                SteadyClock::Get(), nullptr, hooks, threads);
    controller->Open();
    return controller;
  }

  // An MLP "name" whose warm-up runs 10^9 times: a load that lasts until the controller stops it.
  void WriteEndless(const std::string& name) {
    examples::ModelOptions o = Cpu();
    o.extra_config =
        "model_warmup { name: \"long\" batch_size: 1 count: 1000000000 "
        "inputs { key: \"INPUT__0\" value { data_type: TYPE_FP32 dims: 64 random_data: true } } }\n";
    ASSERT_TRUE(examples::WriteMlp(repo_.path(), name, o).ok());
  }
  void WriteMlpNamed(const std::string& name) { ASSERT_TRUE(examples::WriteMlp(repo_.path(), name, Cpu()).ok()); }
  static examples::ModelOptions Cpu() {
    examples::ModelOptions o;
    o.max_batch_size = 4;
    o.instance_kind = "KIND_CPU";
    return o;
  }

  // Whether `n` models began to serve (in the registry, READY) within `timeout`.
  bool AwaitLoads(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return loaded_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }
  // Whether a load of `model` started on a load thread within `timeout`.
  bool AwaitLoading(const std::string& model, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto started = [this, &model]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return std::find(started_.begin(), started_.end(), model) != started_.end();
    };
    return mu_.AwaitWithTimeout(absl::Condition(&started), timeout);
  }
  std::vector<std::string> Loaded() {
    absl::MutexLock lock(&mu_);
    return loaded_;
  }

  testing::TempDir repo_{"cs_controller"};
  server::ModelRegistry registry_;
  server::DeviceActivityRegistry devices_;
  std::atomic<int> loads_{0};
  absl::Mutex mu_;
  std::vector<std::string> loaded_ ABSL_GUARDED_BY(mu_);  // the models that began to serve, in order
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);  // the models whose loads started, in order
};

TEST_F(ModelControllerTest, AnotherModelLoadsWhileOneLoadsForever) {
  auto controller = Controller(2);
  Answer endless;
  controller->Load("endless", endless.Callback());
  Answer a;
  controller->Load("a", a.Callback());
  ASSERT_TRUE(a.answered.WaitForNotificationWithTimeout(absl::Seconds(60))) << "'a' waited for 'endless'";
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_FALSE(endless.answered.HasBeenNotified());
  EXPECT_TRUE(registry_.Find("a", "").ok());
  auto loading = registry_.Find("endless", "");
  EXPECT_EQ(loading.status().code(), absl::StatusCode::kUnavailable) << "LOADING";
  // A request for the model that loads waits its turn, in order: answered once Stop ends that load.
  // (A load: an unload would stop the load in progress, AnUnloadStopsItsModelsLoadInProgress.)
  Answer queued;
  controller->Load("endless", queued.Callback());
  StopWithin(*controller);
  ASSERT_TRUE(endless.answered.HasBeenNotified());
  EXPECT_EQ(endless.status.code(), absl::StatusCode::kUnavailable) << endless.status;
  ASSERT_TRUE(queued.answered.HasBeenNotified());
  EXPECT_EQ(queued.status.code(), absl::StatusCode::kUnavailable) << queued.status;
  EXPECT_EQ(loads_.load(), 1);
}

// With the one load thread busy in a load that never ends, another model is still unloaded at once
// (the unload thread), and a load queued meanwhile waits for the load thread.
TEST_F(ModelControllerTest, AnUnloadDoesNotWaitForABusyLoadThread) {
  auto controller = Controller(1);
  Answer a;
  controller->Load("a", a.Callback());
  ASSERT_TRUE(a.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(a.status.ok()) << a.status;
  Answer endless;
  controller->Load("endless", endless.Callback());
  Answer b;
  controller->Load("b", b.Callback());  // waits for the load thread
  Answer unloaded;
  controller->Unload("a", unloaded.Callback());
  ASSERT_TRUE(unloaded.answered.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << "the unload waited for the load thread";
  EXPECT_TRUE(unloaded.status.ok()) << unloaded.status;
  EXPECT_THAT(std::string(registry_.Find("a", "").status().message()), ::testing::HasSubstr("is unloaded"));
  EXPECT_FALSE(endless.answered.HasBeenNotified());
  StopWithin(*controller);
  ASSERT_TRUE(b.answered.HasBeenNotified());
  EXPECT_EQ(b.status.code(), absl::StatusCode::kUnavailable) << "never run: the load thread never freed";
}

// An unload asked for while its model's load still waits for a thread: that load never runs (it is
// answered ABORTED at once, saying why), and the unload runs without waiting for the busy thread;
// the model shows unloaded, not LOADING.
TEST_F(ModelControllerTest, AnUnloadDropsItsModelsLoadThatStillWaits) {
  auto controller = Controller(1);
  Answer endless;
  controller->Load("endless", endless.Callback());
  ASSERT_TRUE(AwaitLoading("endless", absl::Seconds(60)));
  Answer a;
  controller->Load("a", a.Callback());  // waits: the only load thread loads for ever
  EXPECT_EQ(registry_.Find("a", "").status().code(), absl::StatusCode::kUnavailable) << "LOADING while it waits";
  Answer unloaded;
  controller->Unload("a", unloaded.Callback());
  ASSERT_TRUE(a.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(a.status.code(), absl::StatusCode::kAborted) << a.status;
  EXPECT_THAT(std::string(a.status.message()),
              ::testing::HasSubstr("model 'a' not loaded: an unload of it was asked for while the load waited its turn"));
  ASSERT_TRUE(unloaded.answered.WaitForNotificationWithTimeout(absl::Seconds(60))) << "the unload waited for the thread";
  EXPECT_TRUE(unloaded.status.ok()) << unloaded.status;
  EXPECT_THAT(std::string(registry_.Find("a", "").status().message()), ::testing::HasSubstr("is unloaded"));
  EXPECT_FALSE(endless.answered.HasBeenNotified());
  StopWithin(*controller);
  EXPECT_TRUE(Loaded().empty()) << "a never loaded";
}

// An unload asked for while its model loads stops that load at its next warm-up run: the load is
// answered ABORTED saying why, the unload then runs (the model shows unloaded), and the load thread
// is free for the next model.
// A model that served, was unloaded and is loaded again keeps its versions in the index while that
// load waits for the thread (LOADING), and when an unload drops the waiting load (unloaded again):
// one entry per version, never a version-less one.
TEST_F(ModelControllerTest, AnUnloadedModelKeepsItsVersionsListedThroughALoadThatNeverRan) {
  auto controller = Controller(1);
  Answer first;
  controller->Load("a", first.Callback());
  ASSERT_TRUE(first.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(first.status.ok()) << first.status;
  Answer unloaded;
  controller->Unload("a", unloaded.Callback());
  ASSERT_TRUE(unloaded.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(unloaded.status.ok()) << unloaded.status;
  auto entries_of_a = [this] {
    std::vector<server::ModelRegistry::IndexEntry> out;
    for (const auto& e : registry_.Index()) {
      if (e.name == "a") out.push_back(e);
    }
    return out;
  };
  auto listed = entries_of_a();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].version, 1);

  Answer endless;
  controller->Load("endless", endless.Callback());
  ASSERT_TRUE(AwaitLoading("endless", absl::Seconds(60)));
  Answer again;
  controller->Load("a", again.Callback());  // waits: the only load thread loads for ever
  listed = entries_of_a();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].version, 1) << "listed while its load waits";
  EXPECT_EQ(listed[0].state, server::ModelRegistry::IndexEntry::State::kLoading);
  Answer unloaded_again;
  controller->Unload("a", unloaded_again.Callback());
  ASSERT_TRUE(again.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(again.status.code(), absl::StatusCode::kAborted) << again.status;
  ASSERT_TRUE(unloaded_again.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(unloaded_again.status.ok()) << unloaded_again.status;
  listed = entries_of_a();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].version, 1) << "unloaded again, still version 1";
  EXPECT_THAT(listed[0].reason, ::testing::HasSubstr("is unloaded"));
  StopWithin(*controller);
}

TEST_F(ModelControllerTest, AnUnloadStopsItsModelsLoadInProgress) {
  auto controller = Controller(1);
  Answer endless;
  controller->Load("endless", endless.Callback());
  ASSERT_TRUE(AwaitLoading("endless", absl::Seconds(60)));
  Answer unloaded;
  controller->Unload("endless", unloaded.Callback());
  ASSERT_TRUE(endless.answered.WaitForNotificationWithTimeout(absl::Seconds(60))) << "the load was not stopped";
  EXPECT_EQ(endless.status.code(), absl::StatusCode::kAborted) << endless.status;
  EXPECT_THAT(std::string(endless.status.message()),
              ::testing::HasSubstr("model 'endless' not loaded: an unload of it was asked for while it loaded"));
  ASSERT_TRUE(unloaded.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(unloaded.status.ok()) << unloaded.status;
  EXPECT_THAT(std::string(registry_.Find("endless", "").status().message()), ::testing::HasSubstr("is unloaded"));
  Answer a;
  controller->Load("a", a.Callback());
  ASSERT_TRUE(a.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(a.status.ok()) << a.status;
  StopWithin(*controller);
}

TEST_F(ModelControllerTest, TheSameLoadAskedAgainWhileItWaitsSharesItsRun) {
  auto controller = Controller(1);
  std::vector<std::unique_ptr<Answer>> answers;
  for (int i = 0; i < 3; ++i) {
    answers.push_back(std::make_unique<Answer>());
    controller->Load("b", answers.back()->Callback());
  }
  for (auto& answer : answers) {
    ASSERT_TRUE(answer->answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
    EXPECT_TRUE(answer->status.ok()) << answer->status;
  }
  // The first may have started before the others came (then they share the second run), or not.
  EXPECT_LE(loads_.load(), 2) << "three loads asked together, each run on its own";
  EXPECT_GE(loads_.load(), 1);
  StopWithin(*controller);
}

TEST_F(ModelControllerTest, AModelsRequestsRunInTheOrderTheyCame) {
  auto controller = Controller(4);
  Answer load, unload, again;
  controller->Load("a", load.Callback());
  controller->Unload("a", unload.Callback());
  controller->Load("a", again.Callback());
  ASSERT_TRUE(again.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(load.answered.HasBeenNotified() && unload.answered.HasBeenNotified()) << "answered in order";
  // The unload may come while the first load still warms up: it stops that load (ABORTED).
  EXPECT_TRUE(load.status.ok() || load.status.code() == absl::StatusCode::kAborted) << load.status;
  EXPECT_TRUE(unload.status.ok() && again.status.ok());
  EXPECT_TRUE(registry_.Find("a", "").ok()) << "the last request (a load) decides";
  EXPECT_EQ(loads_.load(), load.status.ok() ? 2 : 1);
  StopWithin(*controller);
}

// A scan's loads run side by side, and beside later scans: a model whose load never ends holds up
// neither another new model of the same scan ("z_new", which a scan loading one model after another
// would reach only after "new_endless", never) nor a model added after it ("zz_later", found by a
// later scan).
TEST_F(ModelControllerTest, AScansLoadsRunSideBySide) {
  auto controller = Controller(2);
  controller->NoteRepository();  // a, b and endless are there before the scans start
  WriteEndless("new_endless");
  WriteMlpNamed("z_new");
  controller->StartPolling(absl::Milliseconds(20));
  ASSERT_TRUE(AwaitLoads(1, absl::Seconds(60))) << "'z_new' never loaded";
  EXPECT_EQ(Loaded(), std::vector<std::string>{"z_new"});
  EXPECT_TRUE(registry_.Find("z_new", "").ok());
  EXPECT_EQ(registry_.Find("new_endless", "").status().code(), absl::StatusCode::kUnavailable) << "LOADING";
  EXPECT_FALSE(registry_.Knows("a")) << "known before the scans: not loaded by them";
  WriteMlpNamed("zz_later");
  ASSERT_TRUE(AwaitLoads(2, absl::Seconds(60))) << "a later scan waited for the endless load";
  EXPECT_EQ(Loaded(), (std::vector<std::string>{"z_new", "zz_later"}));
  EXPECT_EQ(controller->polls(), 0) << "the first scan is done once its endless load is: at Stop";
  StopWithin(*controller);
  EXPECT_EQ(Loaded(), (std::vector<std::string>{"z_new", "zz_later"}));
}

// Poll mode: a model directory removed while its model loads stops that load; the model leaves
// service and the index, and the scan that found it is done.
TEST_F(ModelControllerTest, ADirectoryRemovedWhileItsModelLoadsStopsTheLoad) {
  auto controller = Controller(1);
  controller->NoteRepository();
  WriteEndless("gone_endless");
  controller->StartPolling(absl::Milliseconds(20));
  ASSERT_TRUE(AwaitLoading("gone_endless", absl::Seconds(60)));
  ASSERT_TRUE(RemoveTree(repo_.path() + "/gone_endless"));
  ASSERT_TRUE(controller->AwaitPolls(1, absl::Seconds(60))) << "the first scan's endless load was not stopped";
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (registry_.Knows("gone_endless") && absl::Now() < deadline) {
    ASSERT_TRUE(controller->AwaitPolls(controller->polls() + 1, absl::Seconds(60)));
  }
  EXPECT_FALSE(registry_.Knows("gone_endless")) << "unloaded, and out of the index with its directory";
  StopWithin(*controller);
}

// With one thread busy loading forever, the models a scan found wait for it, and show LOADING
// meanwhile (RepositoryIndex, and UNAVAILABLE to requests), not unknown; later scans go on.
TEST_F(ModelControllerTest, ModelsAScanFoundShowLoadingWhileTheyWaitForAThread) {
  auto controller = Controller(1);
  controller->NoteRepository();
  WriteEndless("new_endless");
  WriteMlpNamed("waiting");
  controller->StartPolling(absl::Milliseconds(20));
  // The scan marks both before either load starts; the first scan finds both (written before it).
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!registry_.Knows("waiting") && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(registry_.Knows("waiting")) << "the scan never found it";
  auto index = registry_.Index();
  for (const char* name : {"new_endless", "waiting"}) {
    auto it = std::find_if(index.begin(), index.end(), [&](const auto& e) { return e.name == name; });
    ASSERT_NE(it, index.end()) << name;
    EXPECT_EQ(it->state, server::ModelRegistry::IndexEntry::State::kLoading) << name;
  }
  EXPECT_EQ(registry_.Find("waiting", "").status().code(), absl::StatusCode::kUnavailable);
  // The only thread loads forever, and a later scan still finds what is added after: scans do not
  // wait for a load thread.
  WriteMlpNamed("later");
  const absl::Time later_deadline = absl::Now() + absl::Seconds(60);
  while (!registry_.Knows("later") && absl::Now() < later_deadline) std::this_thread::yield();
  EXPECT_TRUE(registry_.Knows("later")) << "no scan found it while the thread was busy";
  EXPECT_EQ(registry_.Find("later", "").status().code(), absl::StatusCode::kUnavailable) << "LOADING";
  StopWithin(*controller);
  EXPECT_TRUE(Loaded().empty());
}

// The loader serves a version directory that is a link to a directory; a scan must see one added
// (it walked the model's directory without following links, so the new version never loaded).
TEST_F(ModelControllerTest, AVersionDirectoryAddedAsALinkIsFoundByTheScan) {
  testing::TempDir store("cs_store");
  ASSERT_TRUE(examples::WriteMlp(store.path(), "s", Cpu()).ok());
  auto controller = Controller(1);
  controller->NoteRepository();
  std::filesystem::create_directory_symlink(std::filesystem::path(store.path()) / "s" / "1",
                                            std::filesystem::path(repo_.path()) / "a" / "2");
  controller->StartPolling(absl::Milliseconds(20));
  ASSERT_TRUE(controller->AwaitPolls(1, absl::Seconds(60)));
  EXPECT_THAT(Loaded(), ::testing::ElementsAre("a")) << "the scan found a's new version";
  auto served = registry_.Find("a", "2");
  EXPECT_TRUE(served.ok()) << served.status();
  StopWithin(*controller);
}

// A load whose repository cannot be listed when it runs (unmounted, removed; a load with files
// skips the listing when it is asked for) fails, and the model leaves LOADING for that error.
TEST_F(ModelControllerTest, ALoadThatCannotListTheRepositoryLeavesLoading) {
  auto controller = Controller(1);
  ASSERT_TRUE(RemoveTree(repo_.path()));
  server::LoadOverrides overrides;
  overrides.config = R"({"input": [{"name": "INPUT__0", "data_type": "TYPE_FP32", "dims": [64]}],
    "output": [{"name": "OUTPUT__0", "data_type": "TYPE_FP32", "dims": [10]}]})";
  overrides.files["1/model.pt"] = "not read: the load fails before";
  Answer answer;
  controller->Load("sent", overrides, answer.Callback());
  ASSERT_TRUE(answer.answered.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_FALSE(answer.status.ok());
  const auto found = registry_.Find("sent", "");
  ASSERT_FALSE(found.ok());
  EXPECT_THAT(std::string(found.status().message()), ::testing::HasSubstr("model 'sent' failed to load"));
  for (const auto& entry : registry_.Index()) {
    if (entry.name == "sent") EXPECT_NE(entry.state, server::ModelRegistry::IndexEntry::State::kLoading);
  }
  StopWithin(*controller);
}

}  // namespace
}  // namespace chronoserve
