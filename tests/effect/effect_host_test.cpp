// The effect's typed tests on the host handlers: lists and gpu/host.
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::Lists, ::osprey::GpuHost
#include "effect/effect_typed_tests.hpp"
