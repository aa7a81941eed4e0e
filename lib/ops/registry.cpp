// The explicit list of every operator monet knows. Each folder of lib/ops exports the OpDefs it defines
// (its forward op first, then the backward ops it emits); adding an op = a folder + one line here.
#include <unordered_map>

#include "ops/op.h"

namespace monet::ops {
#define MONET_OP_FOLDERS(X)                                                                                     \
  X(relu) X(clip) X(sigmoid) X(hard_sigmoid) X(hard_swish) X(tanh) X(identity)                                  \
  X(leaky_relu) X(prelu) X(elu) X(softplus) X(abs) X(rounding)                                                \
  X(pow) X(sqrt) X(erf) X(gelu) X(neg) X(exp) X(log) X(reciprocal) X(sin) X(cos) X(trig)                     \
  X(where) X(compare) X(logic) X(cast)                                                                          \
  X(add) X(sub) X(mul) X(div) X(max_min) X(sum) X(reduce_sum_to)                                               \
  X(conv) X(conv_transpose) X(gemm) X(matmul)                                                                   \
  X(batch_norm) X(layer_norm) X(max_pool) X(average_pool) X(global_average_pool) X(reduce_mean) X(softmax)      \
  X(dropout) X(concat) X(split) X(slice) X(flatten) X(reshape) X(transpose) X(pad) X(resize)                    \
  X(expand) X(gather) X(gather_elements) X(unsqueeze) X(squeeze) X(reduce_max) X(cum_sum) X(trilu) X(tile)     \
  X(attention) X(softmax_cross_entropy) X(linear_cross_entropy) X(sum_loss) X(sgd_update)
#define MONET_DECLARE(folder) extern const std::vector<const OpDef*> folder##_ops;
MONET_OP_FOLDERS(MONET_DECLARE)
#undef MONET_DECLARE
}  // namespace monet::ops

namespace monet {

const std::vector<const OpDef*>& all_ops() {
  static const std::vector<const OpDef*> list = [] {
    std::vector<const OpDef*> out;
#define MONET_APPEND(folder) out.insert(out.end(), ops::folder##_ops.begin(), ops::folder##_ops.end());
    MONET_OP_FOLDERS(MONET_APPEND)
#undef MONET_APPEND
    return out;
  }();
  return list;
}

const OpDef* find_op(std::string_view name) {
  static const std::unordered_map<std::string_view, const OpDef*> by_name = [] {
    std::unordered_map<std::string_view, const OpDef*> m;
    for (const OpDef* d : all_ops()) {
      MONET_CHECK(d->infer != nullptr, "op ", d->name, " has no shape rule");
      MONET_CHECK(m.emplace(d->name, d).second, "op ", d->name, " registered twice");
    }
    return m;
  }();
  auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

const OpDef& op_def(std::string_view name) {
  const OpDef* d = find_op(name);
  if (!d) fail("unsupported op type '", name, "'");
  return *d;
}

}  // namespace monet
