// Not implemented yet: registers no op, so a model using it is rejected as unsupported.
#include "ops/op.h"

namespace monet::ops {
extern const std::vector<const OpDef*> sgd_update_ops;
const std::vector<const OpDef*> sgd_update_ops = {};
}  // namespace monet::ops
