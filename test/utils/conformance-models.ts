import {
  type DType,
  type Dim,
  encodeModel,
  type GraphSpec,
  initializer,
  node,
  type TensorData,
  type Value,
  valueInfo,
} from './onnx-graph.js'

// A conformance corpus for the model server: small real ONNX models, each with a valid request.
// Every dtype × every kind of declared shape × one or two inputs, plus the graph features a
// server must not trip on (optional inputs, data-dependent output shapes, control flow).
// The cases carry no expected outputs: a conformance test compares what the server answers with
// what onnxruntime-node answers for the same model and inputs, so the data only has to be
// deterministic and sit on the edges where an encoder or decoder can lose a value.

export interface ConformanceTensor {
  name: string
  /** onnxruntime-node names: float32, float64, float16, int8 … uint64, bool, string. */
  dtype: string
  shape: number[]
  data: TensorData
}

export interface ConformanceCase {
  /** A lower-case name usable as a model name: [a-z0-9_-], e.g. "int64-scalar-2in-2out". */
  id: string
  /** The encoded model. */
  model: Uint8Array
  /** Inputs to send (a valid request for the model); optional inputs the case leaves out are absent. */
  inputs: ConformanceTensor[]
  /** What the model declares: true when every input's and output's first dimension is symbolic. */
  batchable: boolean
  /** Free text: what the case covers. */
  covers: string
  /** A request the server must refuse (400), with an error matching this. */
  refused?: RegExp
}

/** `count` values taken round-robin from `values`, starting at `offset` (so two inputs differ). */
function cycle<T>(values: readonly T[], count: number, offset: number): T[] {
  return Array.from({ length: count }, (_, i) => values[(i + offset) % values.length]!)
}

// IEEE half bit patterns: float16 travels as raw bits, so NaN, ±Inf, −0 and subnormals must survive.
const HALF_BITS = [0x3c00, 0x7e00, 0x7c00, 0xfc00, 0x8000, 0x0001, 0x7bff, 0xbc00, 0x3555, 0x0000]
const STRINGS = ['hello', '', 'héllo wörld', '日本語', '🙂 emoji', 'quote " and backslash \\', 'tab\tnew\nline']

interface DTypeSamples {
  /** `count` edge values, starting at `offset` in the table. */
  fill: (count: number, offset: number) => TensorData
  /** The op giving the second output of a two-output model; Identity where onnxruntime has nothing cheap. */
  second: 'Identity' | 'Neg' | 'Not'
}

// Edge values first, so a scalar (one value) gets an edge too. 64-bit values go past 2^53,
// where a JSON number or a double would round them.
const SAMPLES: Record<DType, DTypeSamples> = {
  bool: { fill: (n, o) => Uint8Array.from(cycle([1, 0, 0, 1, 1], n, o)), second: 'Not' },
  uint8: { fill: (n, o) => Uint8Array.from(cycle([255, 0, 1, 127, 128], n, o)), second: 'Identity' },
  uint16: { fill: (n, o) => Uint16Array.from(cycle([65535, 0, 1, 32768, 255], n, o)), second: 'Identity' },
  uint32: { fill: (n, o) => Uint32Array.from(cycle([4294967295, 0, 1, 2147483648, 65536], n, o)), second: 'Identity' },
  uint64: {
    fill: (n, o) => BigUint64Array.from(cycle([18446744073709551615n, 9007199254740993n, 0n, 1n, 2n ** 63n], n, o)),
    second: 'Identity',
  },
  int8: { fill: (n, o) => Int8Array.from(cycle([-128, 127, 0, -1, 1], n, o)), second: 'Identity' },
  int16: { fill: (n, o) => Int16Array.from(cycle([-32768, 32767, 0, -1, 256], n, o)), second: 'Identity' },
  int32: {
    fill: (n, o) => Int32Array.from(cycle([-2147483648, 2147483647, 0, -1, 65536], n, o)),
    second: 'Identity',
  },
  int64: {
    fill: (n, o) =>
      BigInt64Array.from(
        cycle([9007199254740993n, -9223372036854775808n, 9223372036854775807n, -9007199254740993n, 0n, -1n], n, o),
      ),
    second: 'Identity',
  },
  float16: { fill: (n, o) => Uint16Array.from(cycle(HALF_BITS, n, o)), second: 'Identity' },
  float32: {
    // 1e-45 rounds to the smallest float32 subnormal; 3.4028234663852886e38 is float32's max.
    fill: (n, o) =>
      Float32Array.from(cycle([Number.NaN, Infinity, -Infinity, -0, 1e-45, 3.4028234663852886e38, 0.1], n, o)),
    second: 'Neg',
  },
  float64: {
    fill: (n, o) =>
      Float64Array.from(cycle([Number.NaN, Infinity, -Infinity, -0, 5e-324, Number.MAX_VALUE, 0.1], n, o)),
    second: 'Neg',
  },
  string: { fill: (n, o) => cycle(STRINGS, n, o), second: 'Identity' },
}

interface ShapeKind {
  name: string
  declared: Dim[]
  /** The shape sent, which the declared one accepts. */
  fed: number[]
  covers: string
}

const SHAPES: ShapeKind[] = [
  { name: 'scalar', declared: [], fed: [], covers: 'rank 0 (shape [])' },
  { name: 'fixed', declared: [3, 4], fed: [3, 4], covers: 'fixed shape [3,4], first dimension not 1' },
  {
    name: 'batch1',
    declared: [1, 4],
    fed: [1, 4],
    covers: 'fixed batch 1 [1,4], as torch.onnx.export without dynamic axes',
  },
  { name: 'varbatch', declared: ['batch', 3], fed: [2, 3], covers: "symbolic first dimension ['batch',3], fed [2,3]" },
  { name: 'vardim', declared: [2, 'n'], fed: [2, 5], covers: "symbolic non-first dimension [2,'n'], fed [2,5]" },
  { name: 'empty', declared: [0, 3], fed: [0, 3], covers: 'zero-size fixed shape [0,3], fed an empty tensor' },
]

const size = (shape: number[]) => shape.reduce((a, b) => a * b, 1)

/** What `batchable` promises: every declared input and output has a symbolic first dimension. */
const isBatchable = (spec: GraphSpec) => [...spec.inputs, ...spec.outputs].every((v) => typeof v.dims[0] === 'string')

function makeCase(id: string, covers: string, spec: GraphSpec, inputs: ConformanceTensor[]): ConformanceCase {
  return { id, model: encodeModel(spec), inputs, batchable: isBatchable(spec), covers }
}

function tensor(name: string, dtype: DType, shape: number[], data: TensorData): ConformanceTensor {
  return { name, dtype, shape, data }
}

/** One model per dtype × shape × arity: x0 → Identity → y0, and for two, x1 → (Identity|Neg|Not) → y1. */
function dtypeCases(): ConformanceCase[] {
  const out: ConformanceCase[] = []
  for (const [dtype, samples] of Object.entries(SAMPLES) as [DType, DTypeSamples][]) {
    for (const shape of SHAPES) {
      for (const arity of [1, 2]) {
        const ios = Array.from({ length: arity }, (_, i) => i)
        const spec: GraphSpec = {
          nodes: ios.map((i) => node(i === 0 ? 'Identity' : samples.second, [`x${i}`], [`y${i}`])),
          inputs: ios.map((i): Value => ({ name: `x${i}`, dtype, dims: shape.declared })),
          outputs: ios.map((i): Value => ({ name: `y${i}`, dtype, dims: shape.declared })),
        }
        // Offset 3 for the second input, so its values differ from the first one's.
        const inputs = ios.map((i) => tensor(`x${i}`, dtype, shape.fed, samples.fill(size(shape.fed), i * 3)))
        const ops = arity === 1 ? 'Identity' : `Identity + ${samples.second}`
        const covers = `${dtype}, ${shape.covers}, ${arity} in / ${arity} out (${ops})`
        out.push(makeCase(`${dtype}-${shape.name}-${arity}in-${arity}out`, covers, spec, inputs))
      }
    }
  }
  return out
}

const f32 = (name: string, dims: Dim[]): Value => ({ name, dtype: 'float32', dims })
const i64 = (name: string, dims: Dim[]): Value => ({ name, dtype: 'int64', dims })

/**
 * y = x + bias, where bias is a graph input with an initializer: a request may leave it out.
 * onnxruntime-node 1.30 lists only x in inputNames/inputMetadata and ignores a fed bias (the
 * default applies either way); x is fixed so that the graph's view and onnxruntime's agree on batchable.
 */
function optionalInputCases(): ConformanceCase[] {
  const spec: GraphSpec = {
    nodes: [node('Add', ['x', 'bias'], ['y'])],
    inputs: [f32('x', [2, 3]), f32('bias', [3])],
    outputs: [f32('y', [2, 3])],
    initializers: [initializer('bias', 'float32', [3], Float32Array.of(0.5, -1, 2))],
  }
  const x = tensor('x', 'float32', [2, 3], Float32Array.of(1, 2, 3, 4, 5, 6))
  const why = 'optional input: bias is a graph input with an initializer default (IR 8 ≥ 4), y = x + bias'
  return [
    {
      ...makeCase(
        'optional-input-given',
        `${why}; the request sends bias = [10,20,30]: onnxruntime-node cannot override an initializer (it would ` +
          'ignore the value), so a server must refuse it rather than answer as if it were used',
        spec,
        [x, tensor('bias', 'float32', [3], Float32Array.of(10, 20, 30))],
      ),
      refused: /has no input \\"bias\\"/,
    },
    makeCase('optional-input-omitted', `${why}; the request leaves bias out, so the default [0.5,-1,2] applies`, spec, [
      x,
    ]),
  ]
}

/** Outputs whose shape only the data decides: NonZero, Range, window functions. */
function dataShapedCases(): ConformanceCase[] {
  const nonzero: GraphSpec = {
    nodes: [node('NonZero', ['x'], ['y'])],
    inputs: [f32('x', [3, 4])],
    outputs: [i64('y', [2, 'nnz'])],
  }
  const range = (dtype: DType): GraphSpec => ({
    nodes: [node('Range', ['start', 'limit', 'delta'], ['y'])],
    inputs: ['start', 'limit', 'delta'].map((name) => ({ name, dtype, dims: [] })),
    outputs: [{ name: 'y', dtype, dims: ['n'] }],
  })
  const scalars = (dtype: DType, values: TensorData[]) =>
    ['start', 'limit', 'delta'].map((name, i) => tensor(name, dtype, [], values[i]!))
  const window = (op: string, attrs: Record<string, number>, dtype: DType): GraphSpec => ({
    nodes: [node(op, ['size'], ['y'], attrs)],
    inputs: [i64('size', [])],
    outputs: [{ name: 'y', dtype, dims: ['n'] }],
  })
  const windowSize = (n: bigint) => [tensor('size', 'int64', [], BigInt64Array.of(n))]
  return [
    makeCase(
      'nonzero-float32',
      'NonZero: output int64 [2,nnz], nnz decided by the data (NaN counts as non-zero)',
      nonzero,
      [tensor('x', 'float32', [3, 4], Float32Array.of(0, 1, 0, -2, 0, 0, Number.NaN, 0, -0, 3, 0, 0))],
    ),
    makeCase(
      'range-int64',
      'Range with scalar int64 inputs: output length from the values (10, -5, -4 → 4 values)',
      range('int64'),
      scalars('int64', [BigInt64Array.of(10n), BigInt64Array.of(-5n), BigInt64Array.of(-4n)]),
    ),
    makeCase(
      'range-int64-empty',
      'Range that yields zero values (start ≥ limit, delta > 0): an empty output of symbolic shape',
      range('int64'),
      scalars('int64', [BigInt64Array.of(5n), BigInt64Array.of(5n), BigInt64Array.of(1n)]),
    ),
    makeCase(
      'range-float32',
      'Range with scalar float32 inputs (0.5, 3, 0.75 → 4 values)',
      range('float32'),
      scalars('float32', [Float32Array.of(0.5), Float32Array.of(3), Float32Array.of(0.75)]),
    ),
    makeCase(
      'range-float64',
      'Range with scalar float64 inputs (-1, 1, 0.25 → 8 values)',
      range('float64'),
      scalars('float64', [Float64Array.of(-1), Float64Array.of(1), Float64Array.of(0.25)]),
    ),
    makeCase(
      'hann-window',
      'HannWindow (opset 17), periodic: scalar int64 size 8 → float32 [8]',
      window('HannWindow', {}, 'float32'),
      windowSize(8n),
    ),
    makeCase(
      'hamming-window-symmetric',
      'HammingWindow (opset 17), periodic=0: scalar int64 size 5 → float32 [5]',
      window('HammingWindow', { periodic: 0 }, 'float32'),
      windowSize(5n),
    ),
    makeCase(
      'blackman-window-float64',
      'BlackmanWindow (opset 17), output_datatype=DOUBLE: scalar int64 size 6 → float64 [6]',
      window('BlackmanWindow', { output_datatype: 11 }, 'float64'),
      windowSize(6n),
    ),
  ]
}

/** An If whose branches read the outer x: then 2x (Add(x, x)), else −x. */
function controlFlowCases(): ConformanceCase[] {
  const branch = (name: string, op: string, inputs: string[]) => ({
    name,
    node: [node(op, inputs, [`${name}_y`])],
    output: [valueInfo(f32(`${name}_y`, [3]))],
  })
  const spec: GraphSpec = {
    nodes: [
      node('If', ['cond'], ['y'], {
        then_branch: branch('then', 'Add', ['x', 'x']),
        else_branch: branch('else', 'Neg', ['x']),
      }),
    ],
    inputs: [{ name: 'cond', dtype: 'bool', dims: [] }, f32('x', [3])],
    outputs: [f32('y', [3])],
  }
  const x = tensor('x', 'float32', [3], Float32Array.of(1.5, -2, 0))
  const cond = (v: 0 | 1) => tensor('cond', 'bool', [], Uint8Array.of(v))
  return [
    makeCase('if-cond-true', 'If with a bool scalar condition, true: then branch, y = x + x', spec, [cond(1), x]),
    makeCase('if-cond-false', 'If with a bool scalar condition, false: else branch, y = -x', spec, [cond(0), x]),
  ]
}

/** Shapes a server must not assume are shared: output shape ≠ input shape, inputs of different first dimensions. */
function shapeChangeCases(): ConformanceCase[] {
  const reduce: GraphSpec = {
    // Since opset 13 ReduceSum takes its axes as an input; an initializer that is not a graph input fixes them.
    nodes: [node('ReduceSum', ['x', 'axes'], ['y'], { keepdims: 0 })],
    inputs: [f32('x', [3, 4, 5])],
    outputs: [f32('y', [4, 5])],
    initializers: [initializer('axes', 'int64', [1], BigInt64Array.of(0n))],
  }
  const matmul: GraphSpec = {
    nodes: [node('MatMul', ['a', 'b'], ['y'])],
    inputs: [f32('a', [2, 3]), f32('b', [3, 4])],
    outputs: [f32('y', [2, 4])],
  }
  const ramp = (n: number, step: number) => Float32Array.from({ length: n }, (_, i) => i * step - 1)
  return [
    makeCase(
      'reducesum-axis0',
      'fixed first dimension 3 in, a different fixed shape out: ReduceSum [3,4,5] → [4,5]',
      reduce,
      [tensor('x', 'float32', [3, 4, 5], ramp(60, 0.5))],
    ),
    makeCase('matmul-2x3-3x4', 'inputs with different first dimensions: MatMul [2,3] × [3,4] → [2,4]', matmul, [
      tensor('a', 'float32', [2, 3], ramp(6, 1)),
      tensor('b', 'float32', [3, 4], ramp(12, 0.25)),
    ]),
  ]
}

/**
 * Every conformance case, in a stable order with unique ids. Models are encoded on each call.
 * @example
 * for (const c of conformanceCases()) writeFileSync(join(dir, `${c.id}.onnx`), c.model)
 */
export function conformanceCases(): ConformanceCase[] {
  return [...dtypeCases(), ...optionalInputCases(), ...dataShapedCases(), ...controlFlowCases(), ...shapeChangeCases()]
}
