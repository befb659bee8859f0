import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'
import protobuf from 'protobufjs'
import { INFERENCE_PROTO } from '../../framework/server/grpc/inference-proto.js'

// The wire contract of GRPCInferenceService: every field number and type below is what the
// Open Inference Protocol and Triton's extensions publish, and what every Triton or KServe
// client is compiled against. A renumbered or retyped field breaks them silently (protobuf
// reads a wrong number as an unknown field): this table catches it.

// message → "field=number type" ('*' = repeated, 'map<k,v>', oneof members marked '|').
const CONTRACT: Record<string, string> = {
  ServerLiveResponse: 'live=1 bool',
  ServerReadyResponse: 'ready=1 bool',
  ModelReadyRequest: 'name=1 string, version=2 string',
  ModelReadyResponse: 'ready=1 bool',
  ServerMetadataResponse: 'name=1 string, version=2 string, extensions=3 *string',
  ModelMetadataRequest: 'name=1 string, version=2 string',
  'ModelMetadataResponse.TensorMetadata': 'name=1 string, datatype=2 string, shape=3 *int64',
  ModelMetadataResponse:
    'name=1 string, versions=2 *string, platform=3 string, inputs=4 *TensorMetadata, outputs=5 *TensorMetadata',
  InferParameter:
    'bool_param=1 |bool, int64_param=2 |int64, string_param=3 |string, double_param=4 |double, uint64_param=5 |uint64',
  InferTensorContents:
    'bool_contents=1 *bool, int_contents=2 *int32, int64_contents=3 *int64, uint_contents=4 *uint32, ' +
    'uint64_contents=5 *uint64, fp32_contents=6 *float, fp64_contents=7 *double, bytes_contents=8 *bytes',
  'ModelInferRequest.InferInputTensor':
    'name=1 string, datatype=2 string, shape=3 *int64, parameters=4 map<string,InferParameter>, ' +
    'contents=5 InferTensorContents',
  'ModelInferRequest.InferRequestedOutputTensor': 'name=1 string, parameters=2 map<string,InferParameter>',
  ModelInferRequest:
    'model_name=1 string, model_version=2 string, id=3 string, parameters=4 map<string,InferParameter>, ' +
    'inputs=5 *InferInputTensor, outputs=6 *InferRequestedOutputTensor, raw_input_contents=7 *bytes',
  'ModelInferResponse.InferOutputTensor':
    'name=1 string, datatype=2 string, shape=3 *int64, parameters=4 map<string,InferParameter>, ' +
    'contents=5 InferTensorContents',
  ModelInferResponse:
    'model_name=1 string, model_version=2 string, id=3 string, parameters=4 map<string,InferParameter>, ' +
    'outputs=5 *InferOutputTensor, raw_output_contents=6 *bytes',
  ModelStreamInferResponse: 'error_message=1 string, infer_response=2 ModelInferResponse',
  ModelConfigRequest: 'name=1 string, version=2 string',
  ModelConfigResponse: 'config=1 ModelConfig',
  ModelStatisticsRequest: 'name=1 string, version=2 string',
  StatisticDuration: 'count=1 uint64, ns=2 uint64',
  InferStatistics:
    'success=1 StatisticDuration, fail=2 StatisticDuration, queue=3 StatisticDuration, ' +
    'compute_input=4 StatisticDuration, compute_infer=5 StatisticDuration, compute_output=6 StatisticDuration, ' +
    'cache_hit=7 StatisticDuration, cache_miss=8 StatisticDuration',
  InferBatchStatistics:
    'batch_size=1 uint64, compute_input=2 StatisticDuration, compute_infer=3 StatisticDuration, ' +
    'compute_output=4 StatisticDuration',
  MemoryUsage: 'type=1 string, id=2 int64, byte_size=3 uint64',
  ModelStatistics:
    'name=1 string, version=2 string, last_inference=3 uint64, inference_count=4 uint64, ' +
    'execution_count=5 uint64, inference_stats=6 InferStatistics, batch_stats=7 *InferBatchStatistics, ' +
    'memory_usage=8 *MemoryUsage',
  ModelStatisticsResponse: 'model_stats=1 *ModelStatistics',
  ModelRepositoryParameter: 'bool_param=1 |bool, int64_param=2 |int64, string_param=3 |string, bytes_param=4 |bytes',
  RepositoryIndexRequest: 'repository_name=1 string, ready=2 bool',
  'RepositoryIndexResponse.ModelIndex': 'name=1 string, version=2 string, state=3 string, reason=4 string',
  RepositoryIndexResponse: 'models=1 *ModelIndex',
  RepositoryModelLoadRequest:
    'repository_name=1 string, model_name=2 string, parameters=3 map<string,ModelRepositoryParameter>',
  RepositoryModelUnloadRequest:
    'repository_name=1 string, model_name=2 string, parameters=3 map<string,ModelRepositoryParameter>',
  ModelInput: 'name=1 string, data_type=2 DataType, dims=4 *int64',
  ModelOutput: 'name=1 string, data_type=2 DataType, dims=3 *int64',
  ModelInstanceGroup: 'name=1 string, count=2 int32, gpus=3 *int32, kind=4 Kind',
  ModelQueuePolicy:
    'timeout_action=1 TimeoutAction, default_timeout_microseconds=2 uint64, allow_timeout_override=3 bool, ' +
    'max_queue_size=4 uint32',
  ModelDynamicBatching:
    'preferred_batch_size=1 *int32, max_queue_delay_microseconds=2 uint64, preserve_ordering=3 bool, ' +
    'priority_levels=4 uint64, default_priority_level=5 uint64, default_queue_policy=6 ModelQueuePolicy',
  'ModelSequenceBatching.StrategyOldest':
    'max_candidate_sequences=1 int32, preferred_batch_size=2 *int32, max_queue_delay_microseconds=3 uint64',
  'ModelSequenceBatching.State': 'input_name=1 string, output_name=2 string, data_type=3 DataType, dims=4 *int64',
  ModelSequenceBatching: 'max_sequence_idle_microseconds=1 uint64, oldest=4 |StrategyOldest, state=5 *State',
  'ModelEnsembling.Step':
    'model_name=1 string, model_version=2 int64, input_map=3 map<string,string>, output_map=4 map<string,string>',
  ModelEnsembling: 'step=1 *Step',
  ModelParameter: 'string_value=1 string',
  ModelConfig:
    'name=1 string, platform=2 string, backend=17 string, max_batch_size=4 int32, input=5 *ModelInput, ' +
    'output=6 *ModelOutput, dynamic_batching=11 |ModelDynamicBatching, sequence_batching=13 |ModelSequenceBatching, ' +
    'ensemble_scheduling=15 |ModelEnsembling, ' +
    'instance_group=7 *ModelInstanceGroup, parameters=14 map<string,ModelParameter>',
}

const ENUMS: Record<string, Record<string, number>> = {
  DataType: {
    TYPE_INVALID: 0,
    TYPE_BOOL: 1,
    TYPE_UINT8: 2,
    TYPE_UINT16: 3,
    TYPE_UINT32: 4,
    TYPE_UINT64: 5,
    TYPE_INT8: 6,
    TYPE_INT16: 7,
    TYPE_INT32: 8,
    TYPE_INT64: 9,
    TYPE_FP16: 10,
    TYPE_FP32: 11,
    TYPE_FP64: 12,
    TYPE_STRING: 13,
    TYPE_BF16: 14,
  },
  'ModelInstanceGroup.Kind': { KIND_AUTO: 0, KIND_GPU: 1, KIND_CPU: 2, KIND_MODEL: 3 },
  'ModelQueuePolicy.TimeoutAction': { REJECT: 0, DELAY: 1 },
}

const RPCS = {
  ServerLive: ['ServerLiveRequest', 'ServerLiveResponse'],
  ServerReady: ['ServerReadyRequest', 'ServerReadyResponse'],
  ModelReady: ['ModelReadyRequest', 'ModelReadyResponse'],
  ServerMetadata: ['ServerMetadataRequest', 'ServerMetadataResponse'],
  ModelMetadata: ['ModelMetadataRequest', 'ModelMetadataResponse'],
  ModelInfer: ['ModelInferRequest', 'ModelInferResponse'],
  ModelStreamInfer: ['ModelInferRequest', 'ModelStreamInferResponse', 'stream'],
  ModelConfig: ['ModelConfigRequest', 'ModelConfigResponse'],
  ModelStatistics: ['ModelStatisticsRequest', 'ModelStatisticsResponse'],
  RepositoryIndex: ['RepositoryIndexRequest', 'RepositoryIndexResponse'],
  RepositoryModelLoad: ['RepositoryModelLoadRequest', 'RepositoryModelLoadResponse'],
  RepositoryModelUnload: ['RepositoryModelUnloadRequest', 'RepositoryModelUnloadResponse'],
}

const root = protobuf.parse(INFERENCE_PROTO, { keepCase: true }).root

function describeField(f: protobuf.Field): string {
  const type = f.type.split('.').pop()!
  if (f instanceof protobuf.MapField) return `${f.name}=${f.id} map<${f.keyType},${type}>`
  return `${f.name}=${f.id} ${f.repeated ? '*' : ''}${f.partOf && f.partOf.name !== `_${f.name}` ? '|' : ''}${type}`
}

describe('GRPCInferenceService wire contract', () => {
  it('docs/inference.proto is the protocol text the server loads', () => {
    const docs = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'inference.proto'), 'utf8')
    assert.equal(docs, INFERENCE_PROTO, 'regenerate docs/inference.proto from framework/server/grpc/inference-proto.ts')
  })

  it('package, service and every RPC with its request, response and streaming', () => {
    const service = root.lookupService('inference.GRPCInferenceService')
    assert.deepEqual(Object.keys(service.methods).sort(), Object.keys(RPCS).sort())
    for (const [name, [req, res, stream]] of Object.entries(RPCS)) {
      const m = service.methods[name]!
      assert.equal(m.requestType, req, name)
      assert.equal(m.responseType, res, name)
      assert.equal(Boolean(m.requestStream), stream === 'stream', name)
      assert.equal(Boolean(m.responseStream), stream === 'stream', name)
    }
  })

  for (const [message, fields] of Object.entries(CONTRACT))
    it(`${message}: field numbers and types`, () => {
      const type = root.lookupType(`inference.${message}`)
      assert.deepEqual(type.fieldsArray.map(describeField).sort(), fields.split(', ').sort())
    })

  it('enum values', () => {
    for (const [name, values] of Object.entries(ENUMS))
      assert.deepEqual({ ...root.lookupEnum(`inference.${name}`).values }, values, name)
  })

  it('bytes on the wire: a ModelInferRequest encodes field 7 as raw input contents', () => {
    const T = root.lookupType('inference.ModelInferRequest')
    const bytes = T.encode(T.fromObject({ model_name: 'm', raw_input_contents: [Buffer.from([1, 2])] })).finish()
    // tag (1 << 3 | 2) "m", then tag (7 << 3 | 2) length 2, 1, 2
    assert.deepEqual([...bytes], [0x0a, 1, 0x6d, 0x3a, 2, 1, 2])
  })
})
