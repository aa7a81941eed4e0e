// A convolution over a channel concatenation as one convolution per concatenated input, their outputs summed: the
// concatenation is never stored, nor its gradient (each input's gradient comes from its own data gradient). A
// U-Net's decoder convolves the concatenation of an upsampled map and a skip connection; on UNet b11 that
// concatenation (1.42 GB) and its gradient set the floor of every schedule. The sum runs in place over a part's
// output; the weight is one parameter, split along its input channels (its gradient joined by SplitGrad).
#pragma once

#include "ir/graph.h"

namespace monet {

// Before:  x = Concat(x_0, ..., x_{k-1}; axis = 1), k >= 2, every x_i with at least one channel, x read by one
//          node and not a graph output; y = Conv(x, W[, B]) with group 1; x at least twice W's size (the split
//          holds W's pieces and their gradients, up to twice W, where the joined Conv holds x and its gradient: a
//          function of the shapes, so a model splits at a large batch or image and stays joined at a small one).
// After:   W_0, ..., W_{k-1} = Split(W; axis = 1, split = the x_i's channels, from_concat = 1), named
//          "<conv>/weight_split";
//          y_i = Conv(x_i, W_i[, B for i = 0]; the Conv's attributes, concat_part = i), named "<conv>/part<i>";
//          y = Sum(y_0, ..., y_{k-1}; from_concat = 1), named "<conv>/sum";
//          all three at the Conv's position; the Concat and x are gone (the values after x move down one id), y
//          keeps its name. New values are named "<conv>/weight_part<i>" and "<conv>/part<i>_out". Returns the number
//          of Convs split.
int split_concat_conv(Graph& g);

// "split" when g was imported with the rewrite on (Graph::split_concat_conv) or holds a Conv it made, else "joined":
// how a schedule or profile of g says to import the model again. The rewrite's size condition depends on the batch
// and input shape, so the mode records the option, not whether anything was split: a profile whose convolutions all
// stayed joined at its batch still imports split at a batch where they meet the condition (monet-fit --profile).
const char* concat_conv_mode(const Graph& g);

// Whether node `node` of g is one the rewrite made (a part Conv, the weight's Split, the Sum) or a backward node of
// one.
bool from_split_conv(const Graph& g, int node);

// "<conv>/part<i>": the name of part i's Conv (the rewrite's, and how profile.cpp finds a joined Conv's parts).
std::string split_conv_part_name(const std::string& conv, int part);

// The name (or profile key) a part's node has in the joined graph: "<conv>/part<i><rest>" read as "<conv><rest>" at
// the last mark of a split convolution's node ("/part<i>", "/weight_split", "/sum" ending a segment: a Conv's own
// name may hold such words); empty where there is none or it is not a part's.
std::string split_conv_joined_name(const std::string& name);

}  // namespace monet
