// A model of the pruned nvfp4_expanded_mse search's step counts (docs/performance.md "Searched observer: the
// next lever, simulated"): how many of the 111 steps per group each pruning layout runs on the bench's weights
// (codec_search_bench: N(0, 0.02) BF16), and how many range bounds it evaluates. It is a model, not the codec:
// its arithmetic approximates the reference's (float std::pow, E2M1 ties to the even index), which can move a
// count, not a conclusion; the codec's own search is src/codec/nvfp4_search*.cc. It checks that each layout
// still reaches every group's best error.
//   g++ -O2 -std=c++20 -o /tmp/prune_sim scripts/observers/prune_sim.cc && /tmp/prune_sim 100000
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
static float bf(float x){ uint32_t u; std::memcpy(&u,&x,4); uint32_t r=((u>>16)&1)+0x7fff; u=(u+r)&0xffff0000u; float y; std::memcpy(&y,&u,4); return y; }
static const float kV[8]={0,0.5f,1,1.5f,2,3,4,6};
static int e2m1_idx(float q){ // |q| clamped to 6, round to nearest, ties to even index
  const float mids[7]={0.25f,0.75f,1.25f,1.75f,2.5f,3.5f,5.0f};
  int k=0; for(int j=0;j<7;++j){ if(q>mids[j]) k=j+1; else if(q==mids[j]) { k = ((j+1)%2==0)? j+1 : j; break;} else break; }
  return k; }
constexpr int S=111;
struct G { float err[S]; float t[S][16]; int P[S][16]; bool rep[S]; };
static void eval(const float* w, G& g){
  float a=0; for(int e=0;e<16;++e) a=std::max(a,std::fabs(w[e]));
  float m0=bf(a*1.8f); float prev_s=-1;
  for(int i=0;i<S;++i){ float p=1.0f-(float)i/200.0f; float m=bf(m0*p); float s=bf(m*(1.0f/6.0f)); if(s==0) s=0.0078125f;
    g.rep[i]=(s==prev_s); prev_s=s; float sum=0;
    for(int e=0;e<16;++e){ float x=std::fabs(w[e]); float q=std::min(bf(x/s),6.0f); int k=e2m1_idx(q); float dq=bf(kV[k]*s);
      float d=bf(dq-x); float t=bf(std::pow(std::fabs(d),2.4f)); g.t[i][e]=t; g.P[i][e]=k+(dq<x?1:0); sum+=t; }
    g.err[i]=bf(sum); }
}
static double lb(const G& g,int a,int b){ double s=0; for(int e=0;e<16;++e) if(g.P[a][e]==g.P[b][e]) s+=std::min(g.t[a][e],g.t[b][e]); return s; }
static long NLB=0;
static bool prune(const G& g,int a,int b,float E){ ++NLB; return lb(g,a,b) > (double)E*(1+1e-6); }
// current: record every R-th + last; middles of kept ranges (always, per group), halves' interiors as pairs
static int cur(const G& g,int R){
  std::vector<int> rec; for(int i=0;i<S;i+=R) rec.push_back(i); if(rec.back()!=S-1) rec.push_back(S-1);
  int n=rec.size(); float E=1e30f; for(int i:rec) E=std::min(E,g.err[i]);
  std::vector<std::pair<int,int>> kept; for(size_t j=0;j+1<rec.size();++j){int a=rec[j],b=rec[j+1]; if(b-a>1 && !prune(g,a,b,E)) kept.push_back({a,b});}
  std::vector<std::pair<int,int>> halves;
  for(auto [a,b]:kept){ int m=(a+b)/2; if(m>a&&m<b){ ++n; E=std::min(E,g.err[m]); halves.push_back({a,m}); halves.push_back({m,b}); } else halves.push_back({a,b}); }
  for(auto [a,b]:halves) if(b-a>1 && !prune(g,a,b,E)) for(int i=a+1;i<b;++i) if(!g.rep[i]) ++n;
  return n; }
// per-pair records: recursive bisection breadth-first, every step recorded
static long MISS=0;
static int bis(const G& g,int R){
  int best=0; for(int i=1;i<S;++i) if(g.err[i]<g.err[best]) best=i;
  std::vector<char> ran(S,0);
  std::vector<int> rec; for(int i=0;i<S;i+=R) rec.push_back(i); if(rec.back()!=S-1) rec.push_back(S-1);
  int n=rec.size(); float E=1e30f; for(int i:rec){ E=std::min(E,g.err[i]); ran[i]=1; }
  std::vector<std::pair<int,int>> lvl; for(size_t j=0;j+1<rec.size();++j) lvl.push_back({rec[j],rec[j+1]});
  while(!lvl.empty()){ std::vector<std::pair<int,int>> keep; for(auto [a,b]:lvl) if(b-a>1 && !prune(g,a,b,E)) keep.push_back({a,b});
    std::vector<std::pair<int,int>> nx; for(auto [a,b]:keep){ int m=(a+b)/2; if(!g.rep[m]) ++n; ran[m]=1; E=std::min(E,g.err[m]); nx.push_back({a,m}); nx.push_back({m,b}); }
    lvl.swap(nx); }
  // the first best must have run (or be a repeat of a step that ran with the same error)
  int fb=-1; for(int i=0;i<S;++i) if(ran[i] && (fb<0 || g.err[i]<g.err[fb])) fb=i;
  if(g.err[fb]!=g.err[best]) ++MISS;
  return n; }
// no further split: ranges of R, interiors as pairs
static int flat(const G& g,int R){
  std::vector<int> rec; for(int i=0;i<S;i+=R) rec.push_back(i); if(rec.back()!=S-1) rec.push_back(S-1);
  int n=rec.size(); float E=1e30f; for(int i:rec) E=std::min(E,g.err[i]);
  for(size_t j=0;j+1<rec.size();++j){int a=rec[j],b=rec[j+1]; if(b-a>1 && !prune(g,a,b,E)) for(int i=a+1;i<b;++i) if(!g.rep[i]) ++n;}
  return n; }
// the kernel's rule: blocks of 8 lanes; a range's middle runs (for all 8 lanes) where >= 2 lanes keep it
static int cur_block(G* gs,int R){
  std::vector<int> rec; for(int i=0;i<S;i+=R) rec.push_back(i); if(rec.back()!=S-1) rec.push_back(S-1);
  int n=0; float E[8];
  for(int l=0;l<8;++l){ n+=rec.size(); E[l]=1e30f; for(int i:rec) E[l]=std::min(E[l],gs[l].err[i]); }
  for(size_t j=0;j+1<rec.size();++j){ int a=rec[j],b=rec[j+1]; if(b-a<=1) continue; bool keep[8]; int nk=0;
    for(int l=0;l<8;++l){ keep[l]=!prune(gs[l],a,b,E[l]); nk+=keep[l]; }
    if(nk*4>=8){ int m=(a+b)/2; for(int l=0;l<8;++l){ ++n; E[l]=std::min(E[l],gs[l].err[m]); }
      // halves decided later with updated E: store
      for(int l=0;l<8;++l) if(keep[l]) for(auto [x,y]: {std::pair{a,m},std::pair{m,b}}) if(y-x>1 && !prune(gs[l],x,y,E[l])) for(int i=x+1;i<y;++i) if(!gs[l].rep[i]) ++n;
    } else for(int l=0;l<8;++l) if(keep[l]) for(int i=a+1;i<b;++i) if(!gs[l].rep[i]) ++n; }
  return n; }
int main(int argc,char**argv){
  long groups = argc>1? atol(argv[1]) : 200000;
  std::mt19937_64 rng(42); std::normal_distribution<float> nd(0.0f,0.02f);
  std::vector<float> w(16); static G gb[8]; G& g=gb[0]; double cb8=0; long lbcur=0, lbbis=0;
  double c8=0,c4=0,c16=0,b8=0,b4=0,b16=0,f4=0,f8=0; 
  for(long i=0;i<groups;++i){ for(int e=0;e<16;++e) w[e]=bf(nd(rng)); eval(w.data(),g);
    // check bisection finds the true first best
    if(i%8==0){ for(int l=1;l<8;++l){ for(int e=0;e<16;++e) w[e]=bf(nd(rng)); eval(w.data(),gb[l]); } long z=NLB; cb8+=cur_block(gb,8); lbcur+=NLB-z; }
    { long z=NLB; b16+=bis(g,16); lbbis+=NLB-z; }
    c8+=cur(g,8); c16+=cur(g,16); b8+=bis(g,8); b4+=bis(g,4); f4+=flat(g,4); f8+=flat(g,8); c4+=cur(g,4); }
  auto pr=[&](const char*n,double v){ std::printf("%-34s %.2f steps/group\n",n,v/groups); };
  std::printf("kernel model (blocks of 8, ranges of 8): %.2f steps/group, %.2f bounds/group\n", cb8/(groups/8*8), (double)lbcur/(groups/8*8));
  std::printf("bisect from 16: bounds/group %.2f\n", (double)lbbis/groups);
  std::printf("bisect: groups whose best error was not reached: %ld\n", MISS);
  pr("flat ranges of 4 (old kernel)",f4); pr("flat ranges of 8",f8);
  pr("ranges of 8 + middle, halves as pairs",c8); pr("ranges of 16 + middle, halves as pairs",c16); pr("ranges of 4 + middle",c4);
  pr("per-pair records: bisect from 16",b16); pr("per-pair records: bisect from 8",b8); pr("per-pair records: bisect from 4",b4);
}
