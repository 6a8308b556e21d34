// Public surface of the GGUF module: read metadata, describe a model, write files.
export * from "./types.ts";
export { readGguf, readGgufSync, parseGgufPrefix, GgufFormatError, NeedMoreBytes } from "./reader.ts";
export { describeModel, POOLING_TYPE_NAMES } from "./describe.ts";
export { kvBytesPerToken, kvRowBytes } from "./kv-bytes.ts";
export type { ModelInfo, SpecialTokenIds, FimTokenIds, SamplingDefaults, PoolingTypeName } from "./describe.ts";
export { writeGgufBytes, writeGgufFile, layoutGguf, inferValue } from "./writer.ts";
export type {
  GgufSpec,
  TensorSpec,
  TensorFill,
  TypedValue,
  MetaValue,
  WriterTensorType,
  GgufLayout,
} from "./writer.ts";
export { f32ToF16Bits, f16BitsToF32 } from "./encode-tensor.ts";
