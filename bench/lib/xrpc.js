// A small XRPC client over one undici Pool per server (loopback only).
import { Pool } from 'undici'

export class XrpcError extends Error {
  constructor(status, error, message) {
    super(`${status} ${error}: ${message ?? ''}`)
    this.status = status
    this.error = error
  }
}

export class Xrpc {
  constructor(url, connections = 64) {
    const u = new URL(url)
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname)) {
      throw new Error(`the bench only talks to loopback, not ${u.hostname}`)
    }
    this.url = url
    this.pool = new Pool(u.origin, { connections, pipelining: 1, keepAliveTimeout: 30_000 })
  }

  /**
   * One call. `body` is a JS value (sent as JSON) or a Buffer (sent raw with `encoding`).
   * `post` makes a body-less call a POST (procedures without input).
   * Returns the parsed JSON body, or { bytes } when `raw` is set (the Buffer when raw is 'buffer'). Throws XrpcError on non-2xx.
   */
  async call(nsid, { params, body, token, encoding, raw, post, headers = {} } = {}) {
    let path = `/xrpc/${nsid}`
    if (params) {
      const qs = new URLSearchParams()
      for (const [k, v] of Object.entries(params)) if (v !== undefined) qs.append(k, String(v))
      const s = qs.toString()
      if (s) path += `?${s}`
    }
    const h = { ...headers }
    if (token) h.authorization = `Bearer ${token}`
    let payload
    if (Buffer.isBuffer(body)) {
      payload = body
      h['content-type'] = encoding ?? 'application/octet-stream'
    } else if (body !== undefined) {
      payload = JSON.stringify(body)
      h['content-type'] = 'application/json'
    }
    const res = await this.pool.request({
      method: payload === undefined && !post ? 'GET' : 'POST',
      path,
      headers: h,
      body: payload,
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    })
    if (res.statusCode >= 200 && res.statusCode < 300) {
      if (raw === 'buffer') return Buffer.from(await res.body.arrayBuffer())
      if (raw) {
        let bytes = 0
        for await (const chunk of res.body) bytes += chunk.length
        return { bytes }
      }
      const text = await res.body.text()
      return text ? JSON.parse(text) : undefined
    }
    const text = await res.body.text()
    let parsed
    try {
      parsed = JSON.parse(text)
    } catch {
      parsed = { error: 'NonJson', message: text.slice(0, 200) }
    }
    throw new XrpcError(res.statusCode, parsed.error ?? 'Unknown', parsed.message)
  }

  /** A CORS preflight as a browser sends it before a cross-origin call; throws unless answered. */
  async preflight(nsid, { method = 'GET', headers = 'authorization' } = {}) {
    const res = await this.pool.request({
      method: 'OPTIONS',
      path: `/xrpc/${nsid}`,
      headers: { origin: 'http://app.example', 'access-control-request-method': method, 'access-control-request-headers': headers },
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    })
    await res.body.dump()
    if (res.statusCode >= 300 || res.headers['access-control-allow-origin'] !== '*') {
      throw new XrpcError(res.statusCode, 'NoCors', `preflight answered ${res.statusCode} without Access-Control-Allow-Origin: *`)
    }
  }

  async close() {
    await this.pool.close()
  }
}

/** True when the error says the server does not implement the method (the scenario is n/a). */
export function isNotImplemented(err) {
  return err instanceof XrpcError && (err.status === 501 || err.error === 'MethodNotImplemented')
}
