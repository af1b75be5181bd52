// The shapes PDS_* values are checked against (config.ts reads the variables): each schema
// parses the text of one variable and says in a few words what a bad value should have been.
import { isIP } from 'node:net'
import { z } from 'zod/v4'

export const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')
export const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max)
export const hex64 = z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hexadecimal characters')
export const url = z.url({ protocol: /^https?$/ })
/** 32 bytes as 64 hexadecimal characters or base64 (openssl rand -hex 32, or -base64 32) */
export const key256 = z.string().transform((s, ctx) => {
  const bytes = /^[0-9a-fA-F]{64}$/.test(s)
    ? Buffer.from(s, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(s)
      ? Buffer.from(s, 'base64')
      : undefined
  if (bytes?.length !== 32) {
    ctx.addIssue({ code: 'custom', message: 'must be 32 bytes: 64 hexadecimal characters or base64 (openssl rand -hex 32)' })
    return z.NEVER
  }
  return bytes
})
// `ip` or `ip:port`, IPv6 in brackets when it has a port (as dns.setServers takes them)
export const nameserver = z.string().refine((s) => {
  const m = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(s) ?? /^([^:]+)(?::(\d{1,5}))?$/.exec(s)
  const ip = m ? m[1] : s
  const port = m?.[2] === undefined ? 1 : Number(m[2])
  return isIP(ip) !== 0 && port >= 1 && port <= 65535
}, 'each entry must be ip or ip:port')
// express `trust proxy` entries: a named range or an address with an optional prefix length
export const proxyEntry = z.string().refine((s) => {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(s)) return true
  const [ip, bits, extra] = s.split('/')
  return extra === undefined && isIP(ip) !== 0 && (bits === undefined || /^\d{1,3}$/.test(bits))
}, 'each entry must be loopback, linklocal, uniquelocal or an address with an optional /prefix')
export const list = (item: z.ZodType<string, string>) =>
  z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .pipe(z.array(item))

// `#rgb` or `#rrggbb`: it goes into a stylesheet, so nothing else may pass
export const color = z.string().regex(/^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/, 'must be a hex colour such as #0b57b5')
