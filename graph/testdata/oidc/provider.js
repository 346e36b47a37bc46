// A real OpenID provider for toolgate's tests: oidc-provider (a certified
// implementation) issuing JWT access tokens by the client credentials grant
// for a resource (RFC 8707 resource indicators, RFC 9068 JWT format).
//
// The test's own parameters (test_sub, test_name, test_department, test_org,
// test_nbf, test_iat) set the claims of the person a token stands for, as an
// identity provider's claim mappers would. POST /__rotate replaces the
// signing keys with new ones (key rotation); its body {"keep": true} keeps
// the old ones published beside the new.
//
// Usage: node provider.js PORT; prints "ready ISSUER" once listening.
import * as crypto from 'node:crypto';
import * as http from 'node:http';
import Provider from 'oidc-provider';

const port = Number(process.argv[2]);
const issuer = `http://127.0.0.1:${port}`;

function newKey() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };
}

function newProvider(keys) {
  const provider = new Provider(issuer, {
    clients: [{
      client_id: 'portal',
      client_secret: 'portal-secret',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    }],
    jwks: { keys },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => 'https://toolgate.test/api',
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: 'api',
          audience: resource,
          accessTokenTTL: 300,
          accessTokenFormat: 'jwt',
        }),
      },
    },
    formats: {
      customizers: {
        jwt: (ctx, _token, jwt) => {
          // The token endpoint's body, where the test's parameters are.
          const p = ctx.oidc.body || {};
          if (p.test_sub) jwt.payload.sub = p.test_sub;
          if (p.test_name) jwt.payload.name = p.test_name;
          if (p.test_department) jwt.payload.department = p.test_department;
          if (p.test_org) jwt.payload.organization = p.test_org;
          if (p.test_nbf) jwt.payload.nbf = jwt.payload.iat + Number(p.test_nbf);
          if (p.test_iat) jwt.payload.iat += Number(p.test_iat);
        },
      },
    },
  });
  provider.on('server_error', (_ctx, err) => console.error('server_error', err));
  return provider.callback();
}

let keys = [newKey()];
let handle = newProvider(keys);

http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/__rotate') {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      const keep = body && JSON.parse(body).keep;
      keys = keep ? [newKey(), ...keys] : [newKey()];
      handle = newProvider(keys);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kids: keys.map((k) => k.kid) }));
    });
    return;
  }
  handle(req, res);
}).listen(port, '127.0.0.1', () => {
  console.log(`ready ${issuer}`);
});
