// Form tokens tied to the device session: the token is a hash of the device's secret, which only
// this browser holds (in an HttpOnly cookie another site cannot read or, with SameSite=Lax, send
// along a cross-site post). A forged form lacks the token; a stolen page without the cookie fails.
import { createHash, timingSafeEqual } from 'node:crypto'

export const CSRF_FIELD = 'csrf_token'

export const csrfToken = (device: { secret: string }): string => createHash('sha256').update(`csrf:${device.secret}`).digest('base64url')

export function checkCsrf(device: { secret: string } | undefined, token: unknown): boolean {
  if (!device || typeof token !== 'string' || !token) return false
  const a = createHash('sha256').update(token).digest()
  const b = createHash('sha256').update(csrfToken(device)).digest()
  return timingSafeEqual(a, b)
}
