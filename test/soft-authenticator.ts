// A software WebAuthn authenticator: answers registration options with attestation `none` and
// authentication options with an ES256 assertion, built with node:crypto and CBOR by hand, the
// way a platform authenticator would. Lets the ceremonies be tested without a browser; a test can
// also tamper with what it returns (origin, counter, challenge).
import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'
import { encode } from 'cborg'

type Credential = { id: Buffer; rpId: string; userHandle: string; privateKey: KeyObject; publicKey: KeyObject; counter: number }
type CreationOptions = { challenge: string; rp: { id?: string }; user: { id: string } }
type RequestOptions = { challenge: string; rpId?: string; allowCredentials?: { id: string }[] }

const b64u = (b: Buffer | Uint8Array | string) => Buffer.from(b).toString('base64url')
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest()

export class SoftAuthenticator {
  readonly credentials: Credential[] = []
  /** counts signatures like a hardware key; set false to behave like a synced passkey (always 0) */
  countSignatures = true

  constructor(readonly origin: string) {}

  /** navigator.credentials.create(): a new credential for the options' relying party and user */
  register(options: CreationOptions, tweak: { origin?: string; challenge?: string } = {}) {
    const rpId = options.rp.id ?? new URL(this.origin).hostname
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const cred: Credential = { id: randomBytes(16), rpId, userHandle: options.user.id, privateKey, publicKey, counter: 0 }
    this.credentials.push(cred)
    const jwk = publicKey.export({ format: 'jwk' })
    const cose = new Map<number, unknown>([
      [1, 2], // kty: EC2
      [3, -7], // alg: ES256
      [-1, 1], // crv: P-256
      [-2, Buffer.from(jwk.x!, 'base64url')],
      [-3, Buffer.from(jwk.y!, 'base64url')],
    ])
    const idLen = Buffer.alloc(2)
    idLen.writeUInt16BE(cred.id.length)
    const authData = Buffer.concat([
      sha256(rpId),
      Buffer.from([0x01 | 0x04 | 0x40]), // user present, user verified, attested credential data
      Buffer.alloc(4), // sign count 0
      Buffer.alloc(16), // AAGUID: none
      idLen,
      cred.id,
      Buffer.from(encode(cose)),
    ])
    const clientDataJSON = JSON.stringify({
      type: 'webauthn.create',
      challenge: tweak.challenge ?? options.challenge,
      origin: tweak.origin ?? this.origin,
      crossOrigin: false,
    })
    return {
      id: b64u(cred.id),
      rawId: b64u(cred.id),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64u(clientDataJSON),
        attestationObject: b64u(encode({ fmt: 'none', attStmt: {}, authData })),
        transports: ['internal' as const],
      },
      clientExtensionResults: {},
    }
  }

  /** navigator.credentials.get(): an assertion by an allowed credential (or any discoverable one of the relying party) */
  authenticate(options: RequestOptions, tweak: { origin?: string; counter?: number; credential?: Credential } = {}) {
    const rpId = options.rpId ?? new URL(this.origin).hostname
    const allowed = options.allowCredentials?.map((c) => c.id) ?? []
    const cred = tweak.credential ?? this.credentials.find((c) => c.rpId === rpId && (allowed.length === 0 || allowed.includes(b64u(c.id))))
    if (!cred) throw new Error('no credential for this relying party')
    if (this.countSignatures) cred.counter++
    const counter = Buffer.alloc(4)
    counter.writeUInt32BE(tweak.counter ?? (this.countSignatures ? cred.counter : 0))
    const authData = Buffer.concat([sha256(rpId), Buffer.from([0x01 | 0x04]), counter])
    const clientDataJSON = JSON.stringify({
      type: 'webauthn.get',
      challenge: options.challenge,
      origin: tweak.origin ?? this.origin,
      crossOrigin: false,
    })
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), cred.privateKey)
    return {
      id: b64u(cred.id),
      rawId: b64u(cred.id),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64u(clientDataJSON),
        authenticatorData: b64u(authData),
        signature: b64u(signature),
        userHandle: cred.userHandle,
      },
      clientExtensionResults: {},
    }
  }
}
