// ManagerUnderTest: what a ModelManager needs besides its options (a model registry, a device
// registry and a steady clock), owned together, for tests that drive a ModelManager without a
// server.
#ifndef CHRONOSERVE_TESTS_SERVER_MANAGER_UNDER_TEST_H_
#define CHRONOSERVE_TESTS_SERVER_MANAGER_UNDER_TEST_H_

#include <memory>
#include <utility>

#include "common/clock.h"
#include "server/model_manager.h"

namespace chronoserve::testing {

struct ManagerUnderTest {
  // A manager of `options` over this registry, devices and clock (which must outlive it).
  std::unique_ptr<server::ModelManager> Make(server::ModelLoadOptions options) {
    return std::make_unique<server::ModelManager>(&registry, &devices, std::move(options), &clock);
  }

  server::ModelRegistry registry;
  server::DeviceActivityRegistry devices;
  SteadyClock clock;
};

}  // namespace chronoserve::testing

#endif  // CHRONOSERVE_TESTS_SERVER_MANAGER_UNDER_TEST_H_
