// Not implemented yet: registers no op, so a model using it is rejected as unsupported.
#include "ops/op.h"

namespace monet::ops {
extern const std::vector<const OpDef*> add_ops;
const std::vector<const OpDef*> add_ops = {};
}  // namespace monet::ops
