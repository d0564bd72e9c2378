// The GPT-2 layers' typed tests on the host handlers: lists and gpu/host.
#include "handlers.hpp"

#define OSPREY_TESTED_HANDLERS ::osprey::Lists, ::osprey::GpuHost
#include "layers/layer_typed_tests.hpp"
