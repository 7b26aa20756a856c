# cmake/fuzz_sources.cmake: the sources of mixprec_fuzz_lib (tests/fuzz/CMakeLists.txt).
# The harnesses link a library of only the sources they need (the objects the linker pulls
# from libmixprec.a for them, found with -Wl,-Map), compiled with the fuzz flags of the top
# CMakeLists.txt: a quarter of the library, so the fuzz build fits in CI's time. The same
# list is the object library libmixprec is partly built from (mixprec_parsers), and the
# ordinary build links fuzz_corpus_replay_test against it alone: a refactor that makes a
# parser need another file is an undefined reference in every build (add the file here).
# Every configure checks that each listed file exists, so a rename under src/ fails at once.
set(MIXPREC_FUZZ_LIB_SOURCES
  io/atomic_file.cpp io/byte_source.cpp io/checkpoint.cpp io/checkpoint_checks.cpp io/checkpoint_dir.cpp io/checksums.cpp io/json_limits.cpp io/safetensors.cpp io/safetensors_header.cpp io/safetensors_write.cpp io/yaml_json.cpp
  data/byte_stream.cpp data/cifar_reader.cpp data/image_file.cpp data/idx_reader.cpp data/npy.cpp data/csv_table.cpp data/dataset.cpp
  train/train_config.cpp train/config_text.cpp nn/model_names.cpp nn/model_plan.cpp
  core/convert.cpp core/cpu_features.cpp core/dtype.cpp core/memory.cpp core/random.cpp
  core/status.cpp core/tensor.cpp core/names.cpp core/worker_scope.cpp
  ops/autocast_hook.cpp ops/dispatch.cpp ops/layout.cpp ops/tensor_methods.cpp amp/autocast.cpp amp/policy.cpp
  core/nonfinite_scan.cpp core/strided_copy.cpp
  autograd/engine.cpp autograd/grad_mode.cpp
  backend/onednn/engine.cpp backend/onednn/half_emulation.cpp backend/onednn/memory_desc.cpp backend/onednn/dispatch_log.cpp backend/onednn/dnnl_errors.cpp
  backend/onednn/primitive_cache.cpp backend/onednn/reorder.cpp
  backend/cpu/layout.cpp backend/ref/ref_util.cpp backend/ref/reorder.cpp backend/dispatch_log.cpp
  serve/request.cpp http/request_parser.cpp http/message.cpp
  experiment/experiment_file.cpp experiment/searcher_file.cpp experiment/search_space.cpp experiment/experiment_state.cpp)
# The layer types' entries (src/nn/layer_type.h), which the model-file planner reads: compiled
# a second time with MIXPREC_LAYER_PLAN_ONLY for the harnesses (mixprec_layer_plans), so that
# their build and ONNX parts, and with them nn's modules, ops and kernels, stay out of that
# library. libmixprec compiles them as every other file.
set(MIXPREC_FUZZ_PLAN_ONLY_SOURCES
  nn/layer_types.cpp nn/layer_types_image.cpp nn/layer_types_dense.cpp nn/layer_types_text.cpp)
foreach(f ${MIXPREC_FUZZ_LIB_SOURCES} ${MIXPREC_FUZZ_PLAN_ONLY_SOURCES})
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/src/${f})
    message(FATAL_ERROR "cmake/fuzz_sources.cmake lists src/${f}, which does not exist: update the list")
  endif()
endforeach()
