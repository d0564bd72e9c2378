// Strict kernel faults on the host handlers: lists and gpu/host.
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::Lists, ::osprey::GpuHost
#include "strict/strict_typed_tests.hpp"
