// Host side of strict arithmetic: the words of each fault, and the throw.
#include "osprey/strict.hpp"

#include <fmt/format.h>

namespace osprey {

std::string describeFault(FaultKind kind, Index a, Index b) {
  switch (kind) {
    case FaultKind::Add: return fmt::format("integer overflow: {} + {}", a, b);
    case FaultKind::Sub: return fmt::format("integer overflow: {} - {}", a, b);
    case FaultKind::Mul: return fmt::format("integer overflow: {} * {}", a, b);
    case FaultKind::Div: return fmt::format("integer overflow: {} / {}", a, b);
    case FaultKind::Rem: return fmt::format("integer overflow: {} % {}", a, b);
    case FaultKind::Neg: return fmt::format("integer overflow: -{}", a);
    case FaultKind::DivByZero: return fmt::format("division by zero: {} / {}", a, b);
    case FaultKind::RemByZero: return fmt::format("remainder by zero: {} % {}", a, b);
    case FaultKind::Bounds: return fmt::format("index out of range: {} not below length {}", a, b);
    case FaultKind::None: break;
  }
  return "no fault";
}

void raiseFault(FaultKind kind, Index a, Index b) { throw StrictFault(kind, a, b); }

}  // namespace osprey
