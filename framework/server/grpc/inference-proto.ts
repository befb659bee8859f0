// The Open Inference Protocol over gRPC (KServe v2, with Triton's extensions for streaming,
// model configuration, statistics and the model repository). Package, service, message and
// field names and numbers are the wire contract every Triton and KServe client is built
// against; test/framework/grpc-wire.test.ts pins each number. The text and its comments are
// ours. docs/inference.proto is this text, for generating clients (a test keeps them equal).
// Only the part of Triton's model configuration this server fills in is declared: a client
// compiled with the full message reads it, and fields it lacks are simply absent.

export const INFERENCE_PROTO = `// modelbundle: the Open Inference Protocol (KServe v2) over gRPC, with the
// streaming, model configuration, statistics and model repository extensions.
syntax = "proto3";

package inference;

service GRPCInferenceService {
  // Health: the server answers at all (live), can infer (ready), a model can infer.
  rpc ServerLive(ServerLiveRequest) returns (ServerLiveResponse) {}
  rpc ServerReady(ServerReadyRequest) returns (ServerReadyResponse) {}
  rpc ModelReady(ModelReadyRequest) returns (ModelReadyResponse) {}
  // Metadata: the server's name, version and extensions; a model's tensors.
  rpc ServerMetadata(ServerMetadataRequest) returns (ServerMetadataResponse) {}
  rpc ModelMetadata(ModelMetadataRequest) returns (ModelMetadataResponse) {}
  // One inference.
  rpc ModelInfer(ModelInferRequest) returns (ModelInferResponse) {}
  // Many inferences on one stream; each answer carries its request's id.
  rpc ModelStreamInfer(stream ModelInferRequest) returns (stream ModelStreamInferResponse) {}
  // The settings a model runs with, and what it has done.
  rpc ModelConfig(ModelConfigRequest) returns (ModelConfigResponse) {}
  rpc ModelStatistics(ModelStatisticsRequest) returns (ModelStatisticsResponse) {}
  // The model repository: what the store holds, and loading or unloading at run time.
  rpc RepositoryIndex(RepositoryIndexRequest) returns (RepositoryIndexResponse) {}
  rpc RepositoryModelLoad(RepositoryModelLoadRequest) returns (RepositoryModelLoadResponse) {}
  rpc RepositoryModelUnload(RepositoryModelUnloadRequest) returns (RepositoryModelUnloadResponse) {}
}

message ServerLiveRequest {}
message ServerLiveResponse {
  bool live = 1;
}

message ServerReadyRequest {}
message ServerReadyResponse {
  bool ready = 1;
}

message ModelReadyRequest {
  string name = 1;
  // Empty: the version the server serves by default.
  string version = 2;
}
message ModelReadyResponse {
  bool ready = 1;
}

message ServerMetadataRequest {}
message ServerMetadataResponse {
  string name = 1;
  string version = 2;
  repeated string extensions = 3;
}

message ModelMetadataRequest {
  string name = 1;
  string version = 2;
}
message ModelMetadataResponse {
  message TensorMetadata {
    string name = 1;
    // FP32, INT64, BYTES, ...
    string datatype = 2;
    // -1 marks a dimension of any size.
    repeated int64 shape = 3;
  }
  string name = 1;
  // Every version loaded now.
  repeated string versions = 2;
  string platform = 3;
  repeated TensorMetadata inputs = 4;
  repeated TensorMetadata outputs = 5;
}

// A request or tensor parameter: a flag, a whole number, text or a real number.
message InferParameter {
  oneof parameter_choice {
    bool bool_param = 1;
    int64 int64_param = 2;
    string string_param = 3;
    double double_param = 4;
    uint64 uint64_param = 5;
  }
}

// Tensor values as typed lists, flattened in row-major order. FP16 has no list: send it raw.
message InferTensorContents {
  repeated bool bool_contents = 1;
  // INT8, INT16, INT32
  repeated int32 int_contents = 2;
  repeated int64 int64_contents = 3;
  // UINT8, UINT16, UINT32
  repeated uint32 uint_contents = 4;
  repeated uint64 uint64_contents = 5;
  repeated float fp32_contents = 6;
  repeated double fp64_contents = 7;
  repeated bytes bytes_contents = 8;
}

message ModelInferRequest {
  message InferInputTensor {
    string name = 1;
    string datatype = 2;
    repeated int64 shape = 3;
    map<string, InferParameter> parameters = 4;
    // The values as a typed list, when raw_input_contents is not used.
    InferTensorContents contents = 5;
  }
  message InferRequestedOutputTensor {
    string name = 1;
    map<string, InferParameter> parameters = 2;
  }
  string model_name = 1;
  string model_version = 2;
  // Sent back in the answer: how a stream's answers are matched to its requests.
  string id = 3;
  // timeout (microseconds) and priority (1 is the most urgent), as over HTTP.
  map<string, InferParameter> parameters = 4;
  repeated InferInputTensor inputs = 5;
  // None: every output of the model.
  repeated InferRequestedOutputTensor outputs = 6;
  // One entry per input, in the order of inputs: the little-endian bytes of its values in
  // row-major order (BYTES: each element as a 4-byte length and its bytes).
  repeated bytes raw_input_contents = 7;
}

message ModelInferResponse {
  message InferOutputTensor {
    string name = 1;
    string datatype = 2;
    repeated int64 shape = 3;
    map<string, InferParameter> parameters = 4;
    InferTensorContents contents = 5;
  }
  string model_name = 1;
  string model_version = 2;
  string id = 3;
  map<string, InferParameter> parameters = 4;
  repeated InferOutputTensor outputs = 5;
  // One entry per output, in the order of outputs, encoded as raw_input_contents is.
  repeated bytes raw_output_contents = 6;
}

// One answer on a stream: the response, or why the request failed (the stream goes on).
message ModelStreamInferResponse {
  string error_message = 1;
  ModelInferResponse infer_response = 2;
}

message ModelConfigRequest {
  string name = 1;
  string version = 2;
}
message ModelConfigResponse {
  ModelConfig config = 1;
}

message ModelStatisticsRequest {
  // Empty: every model.
  string name = 1;
  string version = 2;
}
// How many, and how long in all (nanoseconds).
message StatisticDuration {
  uint64 count = 1;
  uint64 ns = 2;
}
message InferStatistics {
  StatisticDuration success = 1;
  StatisticDuration fail = 2;
  StatisticDuration queue = 3;
  StatisticDuration compute_input = 4;
  StatisticDuration compute_infer = 5;
  StatisticDuration compute_output = 6;
  StatisticDuration cache_hit = 7;
  StatisticDuration cache_miss = 8;
}
message InferBatchStatistics {
  uint64 batch_size = 1;
  StatisticDuration compute_input = 2;
  StatisticDuration compute_infer = 3;
  StatisticDuration compute_output = 4;
}
message MemoryUsage {
  string type = 1;
  int64 id = 2;
  uint64 byte_size = 3;
}
message ModelStatistics {
  string name = 1;
  string version = 2;
  // Milliseconds since the epoch; 0 before the first.
  uint64 last_inference = 3;
  uint64 inference_count = 4;
  uint64 execution_count = 5;
  InferStatistics inference_stats = 6;
  repeated InferBatchStatistics batch_stats = 7;
  repeated MemoryUsage memory_usage = 8;
}
message ModelStatisticsResponse {
  repeated ModelStatistics model_stats = 1;
}

message ModelRepositoryParameter {
  oneof parameter_choice {
    bool bool_param = 1;
    int64 int64_param = 2;
    string string_param = 3;
    bytes bytes_param = 4;
  }
}

message RepositoryIndexRequest {
  string repository_name = 1;
  // Only the models ready now.
  bool ready = 2;
}
message RepositoryIndexResponse {
  message ModelIndex {
    string name = 1;
    string version = 2;
    // READY, LOADING, UNLOADING or UNAVAILABLE.
    string state = 3;
    string reason = 4;
  }
  repeated ModelIndex models = 1;
}

// parameters: "version" (string), "config" (runner settings as JSON text), "keep" (bool).
message RepositoryModelLoadRequest {
  string repository_name = 1;
  string model_name = 2;
  map<string, ModelRepositoryParameter> parameters = 3;
}
message RepositoryModelLoadResponse {}

// parameters: "version" (string): unload that version only.
message RepositoryModelUnloadRequest {
  string repository_name = 1;
  string model_name = 2;
  map<string, ModelRepositoryParameter> parameters = 3;
}
message RepositoryModelUnloadResponse {}

// Tensor element types of the model configuration.
enum DataType {
  TYPE_INVALID = 0;
  TYPE_BOOL = 1;
  TYPE_UINT8 = 2;
  TYPE_UINT16 = 3;
  TYPE_UINT32 = 4;
  TYPE_UINT64 = 5;
  TYPE_INT8 = 6;
  TYPE_INT16 = 7;
  TYPE_INT32 = 8;
  TYPE_INT64 = 9;
  TYPE_FP16 = 10;
  TYPE_FP32 = 11;
  TYPE_FP64 = 12;
  TYPE_STRING = 13;
  TYPE_BF16 = 14;
}

message ModelInput {
  string name = 1;
  DataType data_type = 2;
  // Without the batch dimension when max_batch_size > 0.
  repeated int64 dims = 4;
}

message ModelOutput {
  string name = 1;
  DataType data_type = 2;
  repeated int64 dims = 3;
}

message ModelInstanceGroup {
  enum Kind {
    KIND_AUTO = 0;
    KIND_GPU = 1;
    KIND_CPU = 2;
    KIND_MODEL = 3;
  }
  string name = 1;
  // Worker processes.
  int32 count = 2;
  repeated int32 gpus = 3;
  Kind kind = 4;
}

message ModelQueuePolicy {
  enum TimeoutAction {
    REJECT = 0;
    DELAY = 1;
  }
  TimeoutAction timeout_action = 1;
  // A request's deadline when its client sets none.
  uint64 default_timeout_microseconds = 2;
  bool allow_timeout_override = 3;
  uint32 max_queue_size = 4;
}

message ModelDynamicBatching {
  repeated int32 preferred_batch_size = 1;
  // The batch window.
  uint64 max_queue_delay_microseconds = 2;
  bool preserve_ordering = 3;
  uint64 priority_levels = 4;
  uint64 default_priority_level = 5;
  ModelQueuePolicy default_queue_policy = 6;
}

message ModelSequenceBatching {
  // Frames of different sequences batched oldest first, each sequence on one instance.
  message StrategyOldest {
    int32 max_candidate_sequences = 1;
    repeated int32 preferred_batch_size = 2;
    uint64 max_queue_delay_microseconds = 3;
  }
  // Implicit state: the output fed back as the input on the sequence's next request.
  message State {
    string input_name = 1;
    string output_name = 2;
    DataType data_type = 3;
    // One sequence's state, without its batch axis.
    repeated int64 dims = 4;
  }
  uint64 max_sequence_idle_microseconds = 1;
  oneof strategy_choice {
    StrategyOldest oldest = 4;
  }
  repeated State state = 5;
}

message ModelEnsembling {
  message Step {
    string model_name = 1;
    // -1: the version served by default.
    int64 model_version = 2;
    // The step's input tensor name -> the ensemble tensor it reads.
    map<string, string> input_map = 3;
    // The step's output tensor name -> the ensemble tensor it writes.
    map<string, string> output_map = 4;
  }
  repeated Step step = 1;
}

message ModelParameter {
  string string_value = 1;
}

message ModelConfig {
  string name = 1;
  string platform = 2;
  string backend = 17;
  int32 max_batch_size = 4;
  repeated ModelInput input = 5;
  repeated ModelOutput output = 6;
  oneof scheduling_choice {
    ModelDynamicBatching dynamic_batching = 11;
    ModelSequenceBatching sequence_batching = 13;
    ModelEnsembling ensemble_scheduling = 15;
  }
  repeated ModelInstanceGroup instance_group = 7;
  // modelbundle adds "model" (the store tag) and "digest" (the model file's sha256).
  map<string, ModelParameter> parameters = 14;
}
`
