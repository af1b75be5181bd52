// What every step of `pds migrate` shares: the XRPC caller for either server, the progress log and
// the error that ends a run with one line.
export type MigrateIo = {
  /** one line of progress */
  log(line: string): void
  /** the emailed PLC token; undefined when nobody can be asked */
  askToken?(question: string): Promise<string | undefined>
  /** stops the run between two steps (tests: an interruption mid-blobs) */
  signal?: AbortSignal
}

export class MigrateError extends Error {}

export class Xrpc {
  constructor(
    readonly url: string,
    public token?: string,
  ) {}
  async call(
    nsid: string,
    opts: { params?: Record<string, string>; body?: unknown; raw?: Uint8Array; type?: string; token?: string; post?: boolean } = {},
  ) {
    const qs = opts.params ? '?' + new URLSearchParams(opts.params) : ''
    const token = opts.token ?? this.token
    const post = opts.post || opts.body !== undefined || opts.raw !== undefined
    const res = await fetch(`${this.url}/xrpc/${nsid}${qs}`, {
      method: post ? 'POST' : 'GET',
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(opts.raw
          ? { 'content-type': opts.type ?? 'application/octet-stream' }
          : opts.body !== undefined
            ? { 'content-type': 'application/json' }
            : {}),
      },
      body: opts.raw ?? (opts.body !== undefined ? JSON.stringify(opts.body) : undefined),
      signal: AbortSignal.timeout(120_000),
    })
    const ct = res.headers.get('content-type') ?? ''
    const bytes = new Uint8Array(await res.arrayBuffer())
    const json = ct.includes('json') && bytes.length ? JSON.parse(Buffer.from(bytes).toString('utf8')) : undefined
    return { status: res.status, json, bytes, contentType: ct }
  }
  async ok(nsid: string, opts: Parameters<Xrpc['call']>[1] = {}) {
    const res = await this.call(nsid, opts)
    if (res.status !== 200) {
      throw new MigrateError(`${nsid} on ${this.url} failed: ${res.status} ${res.json?.error ?? ''} ${res.json?.message ?? ''}`.trim())
    }
    return res
  }
  /** true unless the server says it does not serve the method */
  async serves(nsid: string, post: boolean) {
    const res = await this.call(nsid, post ? { body: {} } : {})
    return res.status !== 404 && res.json?.error !== 'MethodNotImplemented'
  }
}

/** `local` when the server says its DIDs live in its own log; undefined when it does not say */
export async function plcMode(x: Xrpc): Promise<string | undefined> {
  try {
    const res = await fetch(`${x.url}/xrpc/_health`, { signal: AbortSignal.timeout(10_000) })
    const body = (await res.json()) as { plc?: unknown }
    return typeof body?.plc === 'string' ? body.plc : undefined
  } catch {
    return undefined
  }
}

export const kb = (n: number) =>
  n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1024 / 1024).toFixed(1)} MB`
export function bar(done: number, total: number) {
  const width = 20
  const filled = total ? Math.round((done / total) * width) : width
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`
}
