// An @huggingface/jinja Interpreter that renders as Python Jinja2 does
// (ImmutableSandboxedEnvironment, as transformers renders chat templates).
// The library parses and runs templates; this subclass takes over the
// constructs where its JavaScript semantics show in the output or refuse
// what Jinja2 accepts. Each override says which Jinja2 behaviour it gives.
import { Environment, Interpreter, type Template } from "@huggingface/jinja";
import { applyFilter, hasFilter } from "./filters.ts";
import { getattr, getitem } from "./lookup.ts";
import { binary } from "./operators.ts";
import { iterate, str } from "./python.ts";
import { runTest } from "./tests.ts";
import {
  FunctionValue,
  KeywordArgumentsValue,
  NONE,
  ObjectValue,
  StringValue,
  TupleValue,
  UNDEFINED,
  UndefinedValue,
  bool,
  fn,
  isString,
  number,
  string,
  tuple,
  typeName,
  type Key,
  type Value,
  type ValueOf,
} from "./values.ts";

type Program = Template["parsed"];

/** An AST node of the library's parser, by the fields this file reads. */
interface Node {
  type: string;
  [field: string]: unknown;
}
type Args = [Value[], Map<string, Value>];

/**
 * The library's Interpreter with the members this subclass overrides or calls
 * (private there, so not in its typings). The subclass's own methods must not
 * reuse the library's private names (evaluateFor, evaluateMacro, ...): the
 * library calls those through `this`.
 */
interface LibraryInterpreter {
  global: Environment;
  run(program: Program): Value;
  evaluate(node: Node | undefined, env: Environment): Value;
  evaluateBlock(statements: Node[], env: Environment): ValueOf<string>;
  applyFilter(operand: Value, filter: Node, env: Environment): Value;
  evaluateArguments(args: Node[], env: Environment): Args;
  evaluateSliceExpression(object: Value, slice: Node, env: Environment): Value;
}
const LibraryInterpreter = Interpreter as unknown as new (env?: Environment) => LibraryInterpreter;

/** `{% break %}` / `{% continue %}`, carrying the text the loop body rendered before it. */
class LoopControl extends Error {
  constructor(
    readonly kind: "break" | "continue",
    public output = "",
  ) {
    super(`{% ${kind} %} outside a loop`);
  }
}

/** Statements that render nothing ({% set %}, {% macro %}, comments); every other statement's value is output. */
const SILENT = new Set(["Set", "Macro", "Comment"]);

export class JinjaInterpreter extends LibraryInterpreter {
  override evaluate(node: Node | undefined, env: Environment): Value {
    switch (node?.type) {
      case "For":
        return this.renderFor(node, env);
      case "Break":
      case "Continue":
        throw new LoopControl(node.type === "Break" ? "break" : "continue");
      case "MemberExpression":
        return this.lookupMember(node, env);
      case "BinaryExpression":
        return this.applyOperator(node, env);
      case "TestExpression":
        return this.runTestExpression(node, env);
      case "CallExpression":
        return this.callFunction(node, env);
      case "ObjectLiteral":
        return this.buildDict(node, env);
      case "Macro":
        return this.defineMacro(node, env);
      default:
        return super.evaluate(node, env);
    }
  }

  /**
   * Output as Python prints it: `{{ none }}` is "None", `{{ true }}` "True",
   * a dict or list its repr, undefined "". Text rendered before a break or
   * continue is kept, as Jinja2 streams it out.
   */
  override evaluateBlock(statements: Node[], env: Environment): ValueOf<string> {
    let out = "";
    for (const statement of statements) {
      let value: Value;
      try {
        value = this.evaluate(statement, env);
      } catch (err) {
        if (err instanceof LoopControl) err.output = out + err.output;
        throw err;
      }
      if (!SILENT.has(statement.type)) out += str(value);
    }
    return new StringValue(out);
  }

  /**
   * Filters with Jinja2's semantics (./filters.ts), arguments evaluated
   * as the library does; a filter the adapter does not define is the library's.
   */
  override applyFilter(operand: Value, filter: Node, env: Environment): Value {
    const isCall = filter.type === "CallExpression";
    const name = ((isCall ? (filter.callee as Node) : filter).value as string) ?? "";
    if (!hasFilter(name)) return super.applyFilter(operand, filter, env);
    const [args, kwargs] = isCall ? this.evaluateArguments(filter.args as Node[], env) : ([[], new Map()] as Args);
    return applyFilter(name, operand, args, kwargs);
  }

  /**
   * Jinja2's for loop: iterates anything Python can (a dict's keys, a str's
   * characters; undefined yields nothing), unpacks tuples (`for k, v in
   * d.items()`), filters with `if` before counting `loop.length`, gives each
   * iteration a fresh scope, and renders `else` when no iteration completed.
   */
  private renderFor(node: Node, env: Environment): Value {
    const scope = new Environment(env);
    let iterable = node.iterable as Node;
    let test: Node | undefined;
    if (iterable.type === "SelectExpression") {
      test = iterable.test as Node;
      iterable = iterable.lhs as Node;
    }
    let items = iterate(this.evaluate(iterable, scope));
    const target = node.loopvar as Node;
    if (test) {
      const condition = test;
      items = items.filter((item) => {
        const s = new Environment(scope);
        this.bindTarget(s, target, item);
        return this.evaluate(condition, s).__bool__().value;
      });
    }
    let out = "";
    let iterated = false;
    for (let i = 0; i < items.length; i++) {
      const s = new Environment(scope);
      s.setVariable("loop", loopObject(items, i) as never);
      this.bindTarget(s, target, items[i]!);
      try {
        out += this.evaluateBlock(node.body as Node[], s).value;
      } catch (err) {
        if (!(err instanceof LoopControl)) throw err;
        out += err.output;
        if (err.kind === "break") break;
        continue;
      }
      iterated = true;
    }
    if (!iterated) out += this.evaluateBlock(node.defaultBlock as Node[], scope).value;
    return string(out);
  }

  /** Binds a loop target: a name, or a tuple of targets unpacking any iterable of the same length. */
  private bindTarget(env: Environment, target: Node, value: Value): void {
    if (target.type === "Identifier") {
      env.setVariable(target.value as string, value as never);
      return;
    }
    if (target.type !== "TupleLiteral") throw new Error(`Invalid loop variable(s): ${target.type}`);
    const names = target.value as Node[];
    const parts = iterate(value);
    if (parts.length !== names.length) {
      throw new Error(
        `ValueError: ${parts.length < names.length ? "not enough" : "too many"} values to unpack (expected ${names.length})`,
      );
    }
    names.forEach((name, i) => this.bindTarget(env, name, parts[i]!));
  }

  /** `a.b` and `a[b]` with the sandbox's lookup order (./lookup.ts); slices stay the library's. */
  private lookupMember(node: Node, env: Environment): Value {
    const property = node.property as Node;
    const object = this.evaluate(node.object as Node, env);
    if (node.computed && property.type === "SliceExpression") {
      // The library slices lists and strings; a tuple's slice is a tuple.
      const sliced = this.evaluateSliceExpression(object, property, env);
      return object instanceof TupleValue ? tuple(sliced.value as Value[]) : sliced;
    }
    if (node.computed) return getitem(object, this.evaluate(property, env));
    if (property.type === "IntegerLiteral") return getitem(object, number(property.value as number));
    return getattr(object, property.value as string);
  }

  /** Python operators (./operators.ts); `and` / `or` short-circuit and return an operand. */
  private applyOperator(node: Node, env: Environment): Value {
    const op = (node.operator as { value: string }).value;
    const left = this.evaluate(node.left as Node, env);
    if (op === "and") return left.__bool__().value ? this.evaluate(node.right as Node, env) : left;
    if (op === "or") return left.__bool__().value ? left : this.evaluate(node.right as Node, env);
    return binary(op, left, this.evaluate(node.right as Node, env));
  }

  /** `x is test` with Jinja2's tests (./tests.ts). */
  private runTestExpression(node: Node, env: Environment): Value {
    const result = runTest((node.test as Node).value as string, this.evaluate(node.operand as Node, env));
    return bool(node.negate ? !result : result);
  }

  /** Calls; calling what is not callable names it, as Jinja2's errors do ("'HYTK' is undefined"). */
  private callFunction(node: Node, env: Environment): Value {
    const [args, kwargs] = this.evaluateArguments(node.args as Node[], env);
    if (kwargs.size > 0) args.push(new KeywordArgumentsValue(kwargs));
    const callee = this.evaluate(node.callee as Node, env);
    if (!(callee instanceof FunctionValue)) throw new TypeError(notCallable(node.callee as Node, callee));
    return callee.value(args, env);
  }

  /** Dict literals: Jinja2 keys may be ints (`{0: 0, 512: 128}`, Seed-OSS), not only strings. */
  private buildDict(node: Node, env: Environment): Value {
    const map = new Map<Key, Value>();
    for (const [k, v] of node.value as Map<Node, Node>) {
      const key = this.evaluate(k, env);
      if (!(isString(key) || typeof key.value === "number" || typeof key.value === "boolean")) {
        throw new TypeError(`unhashable or unsupported dict key type: '${typeName(key)}'`);
      }
      map.set(isString(key) ? key.value : Number(key.value), this.evaluate(v, env));
    }
    return new ObjectValue(map);
  }

  /**
   * A macro sees the variables of where it is defined, not of where it is
   * called (a loop variable of the caller is invisible to it, as in Jinja2).
   * The library binds it to the calling scope; this rebinds it to the
   * defining one, passing on `caller` for {% call %} blocks.
   */
  private defineMacro(node: Node, env: Environment): Value {
    super.evaluate(node, env);
    const name = (node.name as Node).value as string;
    const macro = env.variables.get(name) as unknown as Value & { value: (args: Value[], scope: Environment) => Value };
    env.setVariable(
      name,
      fn((args, scope) => {
        const caller = scope.variables.get("caller");
        let home = env;
        if (caller !== undefined) {
          home = new Environment(env);
          home.setVariable("caller", caller);
        }
        return macro.value(args, home);
      }) as never,
    );
    return NONE;
  }
}

/** Jinja2's `loop` inside a for loop. */
function loopObject(items: Value[], i: number): Value {
  const n = items.length;
  return new ObjectValue(
    new Map<Key, Value>([
      ["index", number(i + 1)],
      ["index0", number(i)],
      ["revindex", number(n - i)],
      ["revindex0", number(n - i - 1)],
      ["first", bool(i === 0)],
      ["last", bool(i === n - 1)],
      ["length", number(n)],
      ["depth", number(1)],
      ["depth0", number(0)],
      ["previtem", i > 0 ? items[i - 1]! : UNDEFINED],
      ["nextitem", i < n - 1 ? items[i + 1]! : UNDEFINED],
      ["cycle", fn((args) => (args.length === 0 ? UNDEFINED : args[i % args.length]!))],
    ]),
  );
}

function notCallable(callee: Node, value: Value): string {
  if (value instanceof UndefinedValue) {
    if (callee.type === "Identifier") return `'${callee.value as string}' is undefined`;
    if (callee.type === "MemberExpression" && !callee.computed)
      return `'${(callee.property as Node).value as string}' is undefined`;
  }
  return `'${typeName(value)}' object is not callable`;
}

/** Renders a parsed template with these globals (converted to runtime values by the library). */
export function renderProgram(program: Program, globals: Record<string, unknown>): string {
  const env = new Environment();
  for (const [name, value] of Object.entries(globals)) env.set(name, value);
  const result = new JinjaInterpreter(env).run(program);
  return result instanceof StringValue ? result.value : str(result);
}
