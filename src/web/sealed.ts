// Short-lived state a page carries across a redirect in a cookie: what to show once after a form
// (a message, a new app password, recovery codes) and a half-finished sign-in. Sealed with AES-GCM
// under a key derived from the server's JWT secret and bound to the device, so the browser can
// neither read nor forge it, and a copy on another device does not open.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto'
import type { Request, Response } from 'express'
import type { Config } from '../config.js'
import { clearCookie, readCookie, setCookie } from './cookies.js'
import type { Device } from './devices.js'

const keys = new Map<string, Buffer>()
function keyOf(config: Pick<Config, 'secrets'>): Buffer {
  const secret = config.secrets.jwtSecret
  let key = keys.get(secret)
  if (!key) keys.set(secret, (key = Buffer.from(hkdfSync('sha256', secret, 'pds-web-pages', 'sealed-cookie', 32))))
  return key
}

type Opts = { config: Pick<Config, 'secrets' | 'publicUrl'>; device: Device; path: string }

/** stores `value` (JSON) for at most `maxAgeS` seconds */
export function setSealed(res: Response, name: string, value: unknown, maxAgeS: number, o: Opts): void {
  const iv = randomBytes(12)
  const cipher = createCipheriv('aes-256-gcm', keyOf(o.config), iv)
  cipher.setAAD(Buffer.from(`${name}:${o.device.id}`))
  const exp = Math.floor(Date.now() / 1000) + maxAgeS
  const ct = Buffer.concat([cipher.update(JSON.stringify({ exp, value }), 'utf8'), cipher.final()])
  const sealed = [iv, ct, cipher.getAuthTag()].map((b) => b.toString('base64url')).join('.')
  setCookie(res, name, sealed, { publicUrl: o.config.publicUrl, maxAgeS, path: o.path })
}

/** the value stored under `name`, unless absent, expired, tampered with or from another device */
export function readSealed<T>(req: Pick<Request, 'headers'>, name: string, o: Opts): T | undefined {
  const [iv, ct, tag] = (readCookie(req, name) ?? '').split('.')
  if (!iv || !ct || !tag) return undefined
  try {
    const decipher = createDecipheriv('aes-256-gcm', keyOf(o.config), Buffer.from(iv, 'base64url'))
    decipher.setAAD(Buffer.from(`${name}:${o.device.id}`))
    decipher.setAuthTag(Buffer.from(tag, 'base64url'))
    const plain = Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8')
    const { exp, value } = JSON.parse(plain) as { exp: number; value: T }
    return exp > Date.now() / 1000 ? value : undefined
  } catch {
    return undefined
  }
}

export const clearSealed = (res: Response, name: string, o: Pick<Opts, 'config' | 'path'>) =>
  clearCookie(res, name, { publicUrl: o.config.publicUrl, path: o.path })
