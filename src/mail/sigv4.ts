// AWS Signature Version 4 for one request (what Amazon SES's HTTP API wants), with node:crypto.
import { createHash, createHmac } from 'node:crypto'

export type SigV4Credentials = { accessKeyId: string; secretAccessKey: string; region: string; service: string }

const sha256hex = (data: string | Buffer) => createHash('sha256').update(data).digest('hex')
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest()

/** the headers to add to `headers` (x-amz-date, x-amz-content-sha256, authorization) */
export function signV4(
  req: { method: string; url: string; headers: Record<string, string>; body: string },
  cred: SigV4Credentials,
  now = new Date(),
  { contentHashHeader = true } = {},
): Record<string, string> {
  const url = new URL(req.url)
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '')
  const day = amzDate.slice(0, 8)
  const payloadHash = sha256hex(req.body)
  const headers: Record<string, string> = { ...lower(req.headers), host: url.host, 'x-amz-date': amzDate }
  if (contentHashHeader) headers['x-amz-content-sha256'] = payloadHash
  const names = Object.keys(headers).sort()
  const canonicalHeaders = names.map((n) => `${n}:${headers[n].trim().replace(/\s+/g, ' ')}\n`).join('')
  const signedHeaders = names.join(';')
  const query = [...url.searchParams.entries()]
    .map(([k, v]) => [encode(k), encode(v)])
    .sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&')
  const path =
    url.pathname
      .split('/')
      .map((s) => encode(decodeURIComponent(s)))
      .join('/') || '/'
  const canonical = [req.method, path, query, canonicalHeaders, signedHeaders, payloadHash].join('\n')
  const scope = `${day}/${cred.region}/${cred.service}/aws4_request`
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256hex(canonical)].join('\n')
  const key = hmac(hmac(hmac(hmac('AWS4' + cred.secretAccessKey, day), cred.region), cred.service), 'aws4_request')
  const signature = createHmac('sha256', key).update(toSign).digest('hex')
  const out: Record<string, string> = {
    'x-amz-date': amzDate,
    authorization: `AWS4-HMAC-SHA256 Credential=${cred.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
  }
  if (headers['x-amz-content-sha256']) out['x-amz-content-sha256'] = payloadHash
  return out
}

const lower = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]))
// RFC 3986 unreserved characters stay, everything else is percent-encoded
const encode = (s: string) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())
