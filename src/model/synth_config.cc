// The JSON files `fp4forge synth` writes beside the weights of its built-in layouts: config.json (structure copied
// from what transformers 5.17 writes for each family), the processor configs of the multimodal families and
// generation_config.json. Internal to the model module (declared in synth_geometry.h).
#include "synth_geometry.h"

#include "fp4forge/model/registry.h"

namespace fp4forge::synth_detail {

using Json = nlohmann::json;  // sorted keys, as transformers writes (sort_keys=True)

Json gemma4_config(const Geo& g, bool moe) {
  Json t;
  t["attention_bias"] = false;
  t["attention_dropout"] = 0.0;
  t["attention_k_eq_v"] = g.k_eq_v;
  t["bos_token_id"] = 2;
  t["enable_moe_block"] = moe;
  t["eos_token_id"] = 1;
  t["final_logit_softcapping"] = 30.0;
  t["head_dim"] = g.d;
  t["hidden_activation"] = "gelu_pytorch_tanh";
  t["hidden_size"] = g.H;
  t["hidden_size_per_layer_input"] = 0;
  t["initializer_range"] = 0.02;
  t["intermediate_size"] = g.I;
  t["layer_types"] = gemma4_layer_types(g);
  t["max_position_embeddings"] = g.max_pos;
  t["model_type"] = "gemma4_text";
  t["moe_intermediate_size"] = moe ? Json(g.Im) : Json(nullptr);
  t["num_attention_heads"] = g.A;
  t["num_experts"] = moe ? Json(g.E) : Json(nullptr);
  t["num_hidden_layers"] = g.N;
  t["num_key_value_heads"] = g.KV;
  t["num_kv_shared_layers"] = 0;
  t["pad_token_id"] = 0;
  Json plc = Json::object();
  const auto lt = gemma4_layer_types(g);
  for (std::size_t i = 0; i < lt.size(); ++i)
    if (lt[i] == "full_attention")
      plc[std::to_string(i)] = {{"head_dim", g.dg}, {"num_key_value_heads", g.KVg}};
  t["per_layer_config"] = plc;
  t["rms_norm_eps"] = 1e-06;
  t["rope_parameters"] = {
      {"full_attention",
       {{"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}, {"rope_type", "proportional"}}},
      {"sliding_attention", {{"rope_theta", 10000.0}, {"rope_type", "default"}}}};
  t["sliding_window"] = g.sliding_window;
  t["tie_word_embeddings"] = true;
  t["top_k_experts"] = moe ? Json(g.topk) : Json(nullptr);
  t["use_bidirectional_attention"] = "vision";
  t["use_cache"] = true;
  t["use_double_wide_mlp"] = false;
  t["vocab_size"] = g.V;
  t["vocab_size_per_layer_input"] = g.V;

  const Vision& v = g.vis;
  Json vc;
  vc["_name_or_path"] = "";
  vc["architectures"] = nullptr;
  vc["attention_bias"] = false;
  vc["attention_dropout"] = 0.0;
  vc["chunk_size_feed_forward"] = 0;
  vc["dtype"] = nullptr;
  vc["head_dim"] = v.hd;
  vc["hidden_activation"] = "gelu_pytorch_tanh";
  vc["hidden_size"] = v.H;
  vc["id2label"] = {{"0", "LABEL_0"}, {"1", "LABEL_1"}};
  vc["initializer_range"] = 0.02;
  vc["intermediate_size"] = v.I;
  vc["is_encoder_decoder"] = false;
  vc["label2id"] = {{"LABEL_0", 0}, {"LABEL_1", 1}};
  vc["max_position_embeddings"] = 131072;
  vc["model_type"] = "gemma4_vision";
  vc["num_attention_heads"] = v.heads;
  vc["num_hidden_layers"] = v.N;
  vc["num_key_value_heads"] = v.heads;
  vc["output_attentions"] = false;
  vc["output_hidden_states"] = false;
  vc["patch_size"] = v.patch;
  vc["pooling_kernel_size"] = 3;
  vc["position_embedding_size"] = v.pos;
  vc["problem_type"] = nullptr;
  vc["return_dict"] = true;
  vc["rms_norm_eps"] = 1e-06;
  vc["rope_parameters"] = {{"rope_theta", 100.0}, {"rope_type", "axial"}};
  vc["standardize"] = true;
  vc["use_clipped_linears"] = false;

  Json c;
  c["architectures"] = {family_spec(Family::GEMMA4).wrapper_architecture};
  c["audio_config"] = nullptr;
  c["audio_token_id"] = 258881;
  c["boa_token_id"] = 256000;
  c["boi_token_id"] = 255999;
  c["dtype"] = "bfloat16";
  c["eoa_token_index"] = 258883;
  c["eoi_token_id"] = 258882;
  c["image_token_id"] = 258880;
  c["initializer_range"] = 0.02;
  c["model_type"] = family_spec(Family::GEMMA4).model_types.front();
  c["text_config"] = t;
  c["tie_word_embeddings"] = true;
  c["transformers_version"] = "5.17.0";
  c["video_token_id"] = 258884;
  c["vision_config"] = vc;
  return c;
}

Json qwen3_5_config(const Geo& g, bool moe) {
  Json t;
  t["attention_bias"] = false;
  t["attention_dropout"] = 0.0;
  t["attn_output_gate"] = true;
  t["bos_token_id"] = nullptr;
  t["eos_token_id"] = nullptr;
  t["head_dim"] = g.d;
  t["hidden_act"] = "silu";
  t["hidden_size"] = g.H;
  t["initializer_range"] = 0.02;
  if (!moe) t["intermediate_size"] = g.I;
  t["layer_types"] = qwen_layer_types(g);
  t["linear_conv_kernel_dim"] = g.Kc;
  t["linear_key_head_dim"] = g.Dk;
  t["linear_num_key_heads"] = g.Hk;
  t["linear_num_value_heads"] = g.Hv;
  t["linear_value_head_dim"] = g.Dv;
  t["max_position_embeddings"] = g.max_pos;
  t["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
  t["mtp_num_hidden_layers"] = g.mtp;
  t["mtp_use_dedicated_embeddings"] = false;
  t["num_attention_heads"] = g.A;
  t["num_hidden_layers"] = g.N;
  t["num_key_value_heads"] = g.KV;
  if (moe) {
    t["moe_intermediate_size"] = g.Im;
    t["num_experts"] = g.E;
    t["num_experts_per_tok"] = g.topk;
    t["shared_expert_intermediate_size"] = g.Is;
    t["router_aux_loss_coef"] = 0.001;
    t["output_router_logits"] = false;
  }
  t["pad_token_id"] = nullptr;
  t["partial_rotary_factor"] = 0.25;
  t["rms_norm_eps"] = 1e-06;
  t["rope_parameters"] = {{"partial_rotary_factor", 0.25}, {"rope_theta", 10000.0}, {"rope_type", "default"}};
  t["tie_word_embeddings"] = g.tie;
  t["use_cache"] = true;
  t["vocab_size"] = g.V;

  const Vision& v = g.vis;
  Json vc;
  vc["depth"] = v.N;
  vc["hidden_act"] = "gelu_pytorch_tanh";
  vc["hidden_size"] = v.H;
  vc["in_channels"] = 3;
  vc["initializer_range"] = 0.02;
  vc["intermediate_size"] = v.I;
  vc["model_type"] = moe ? "qwen3_5_moe_vision" : "qwen3_5_vision";
  vc["num_heads"] = v.heads;
  vc["num_position_embeddings"] = v.pos;
  vc["out_hidden_size"] = g.H;
  vc["patch_size"] = v.patch;
  vc["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "axial"}};
  vc["spatial_merge_size"] = 2;
  vc["temporal_patch_size"] = 2;

  Json c;
  c["architectures"] = {family_spec(moe ? Family::QWEN3_5_MOE : Family::QWEN3_5).wrapper_architecture};
  c["dtype"] = "bfloat16";
  c["image_token_id"] = 248056;
  c["model_type"] = family_spec(moe ? Family::QWEN3_5_MOE : Family::QWEN3_5).model_types.front();
  c["text_config"] = t;
  c["tie_word_embeddings"] = g.tie;
  c["transformers_version"] = "5.17.0";
  c["video_token_id"] = 248057;
  c["vision_config"] = vc;
  c["vision_end_token_id"] = 248054;
  c["vision_start_token_id"] = 248053;
  return c;
}

namespace {
/** The keys Llama's and Qwen3-MoE's configs write alike (a decoder of `g`'s widths, bf16, silu, RMSNorm 1e-6). */
Json decoder_config(const Geo& g, Family f) {
  Json c;
  c["architectures"] = {family_spec(f).architectures.front()};
  c["attention_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["dtype"] = "bfloat16";
  c["head_dim"] = g.d;
  c["hidden_act"] = "silu";
  c["hidden_size"] = g.H;
  c["initializer_range"] = 0.02;
  c["intermediate_size"] = g.I;
  c["max_position_embeddings"] = g.max_pos;
  c["model_type"] = family_spec(f).model_types.front();
  c["num_attention_heads"] = g.A;
  c["num_hidden_layers"] = g.N;
  c["num_key_value_heads"] = g.KV;
  c["pad_token_id"] = nullptr;
  c["rms_norm_eps"] = 1e-06;
  c["tie_word_embeddings"] = g.tie;
  c["transformers_version"] = "5.17.0";
  c["use_cache"] = true;
  c["vocab_size"] = g.V;
  return c;
}
}  // namespace

Json llama_config(const Geo& g) {
  Json c = decoder_config(g, Family::LLAMA);
  c["bos_token_id"] = 1;
  c["eos_token_id"] = 2;
  c["mlp_bias"] = false;
  c["pretraining_tp"] = 1;
  c["rope_parameters"] = {{"rope_theta", g.H >= 4096 ? 500000.0 : 10000.0}, {"rope_type", "default"}};
  return c;
}

Json qwen3_moe_config(const Geo& g) {
  Json c = decoder_config(g, Family::QWEN3_MOE);
  c["bos_token_id"] = nullptr;
  c["decoder_sparse_step"] = 1;
  c["eos_token_id"] = nullptr;
  c["max_window_layers"] = g.N;
  c["mlp_only_layers"] = Json::array();
  c["moe_intermediate_size"] = g.Im;
  c["norm_topk_prob"] = true;
  c["num_experts"] = g.E;
  c["num_experts_per_tok"] = g.topk;
  c["output_router_logits"] = false;
  c["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  c["router_aux_loss_coef"] = 0.001;
  c["sliding_window"] = nullptr;
  c["use_sliding_window"] = false;
  return c;
}

namespace {
/** The image-processor keys both families' processors write alike (RGB, rescale by 1/255, bicubic resize). */
Json image_processor(const Geo& g, std::string_view type, bool normalize, Json mean, Json std) {
  Json ip;
  ip["do_convert_rgb"] = true;
  ip["do_normalize"] = normalize;
  ip["do_rescale"] = true;
  ip["do_resize"] = true;
  ip["image_mean"] = std::move(mean);
  ip["image_processor_type"] = type;
  ip["image_std"] = std::move(std);
  ip["patch_size"] = g.vis.patch;
  ip["resample"] = 3;
  ip["rescale_factor"] = 0.00392156862745098;
  return ip;
}
}  // namespace

Json gemma4_processor(const Geo& g) {
  Json ip = image_processor(g, "Gemma4ImageProcessor", false, {0.0, 0.0, 0.0}, {1.0, 1.0, 1.0});
  ip["max_soft_tokens"] = 280;
  ip["pooling_kernel_size"] = 3;
  Json p;
  p["image_processor"] = ip;
  p["image_seq_length"] = 280;
  p["processor_class"] = "Gemma4Processor";
  return p;
}

Json qwen_processor(const Geo& g) {
  Json ip = image_processor(g, "Qwen2VLImageProcessor", true, {0.48145466, 0.4578275, 0.40821073},
                            {0.26862954, 0.26130258, 0.27577711});
  ip["merge_size"] = 2;
  ip["size"] = {{"longest_edge", 1003520}, {"shortest_edge", 3136}};
  ip["temporal_patch_size"] = 2;
  Json p;
  p["image_processor"] = ip;
  p["processor_class"] = "Qwen3VLProcessor";
  return p;
}

Json generation_config(const Json& config) {
  Json g;
  g["_from_model_config"] = true;
  const Json& text = config.contains("text_config") ? config["text_config"] : config;
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
    if (text.contains(k) && !text[k].is_null()) g[k] = text[k];
  g["output_attentions"] = false;
  g["output_hidden_states"] = false;
  g["transformers_version"] = "5.17.0";
  g["use_cache"] = true;
  return g;
}

}  // namespace fp4forge::synth_detail
